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
