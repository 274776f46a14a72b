package main

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line  string
		ok    bool
		group string
		want  result
	}{
		{"BenchmarkLoad/20000/bulk-2   \t 1\t 151234 ns/op\t 12.00 msgs/op", true, "BenchmarkLoad/20000",
			result{name: "bulk", nsPerOp: 151234, extra: []string{"12.00 msgs/op"}}},
		{"BenchmarkCreate/moby-ipvs 1 9500000000 ns/op", true, "BenchmarkCreate",
			result{name: "moby-ipvs", nsPerOp: 9.5e9}},
		{"BenchmarkTopLevel-2 1 10 ns/op", false, "", result{}},
		{"ok  github.com/ipvsplane/ipvsplane/ipset 3.2s", false, "", result{}},
		{"BenchmarkX/y-2 --- FAIL", false, "", result{}},
	}
	for _, tt := range tests {
		got, group, ok := parse(tt.line)
		if ok != tt.ok || group != tt.group || got.name != tt.want.name || got.nsPerOp != tt.want.nsPerOp || !slices.Equal(got.extra, tt.want.extra) {
			t.Errorf("parse(%q) = %+v %q %v, want %+v %q %v", tt.line, got, group, ok, tt.want, tt.group, tt.ok)
		}
	}
}

func TestExtras(t *testing.T) {
	base, _, _ := parse("BenchmarkP/n=10/kube-proxy-ipvs-2 1 9000000000 ns/op 9.000 sync-s 100.0 peak-MiB")
	r, _, _ := parse("BenchmarkP/n=10/ipvsplane-2 1 300000000 ns/op 0.3000 sync-s 40.00 peak-MiB 2.000 change-ms")
	tests := []struct {
		r    result
		want string
	}{
		{base, "9.000 sync-s  100.0 peak-MiB"},
		{r, "0.3000 sync-s (0.033x)  40.00 peak-MiB (0.40x)  2.000 change-ms"},
	}
	for _, tt := range tests {
		if got := extras(tt.r, base); got != tt.want {
			t.Errorf("extras(%s) = %q, want %q", tt.r.name, got, tt.want)
		}
	}
}
