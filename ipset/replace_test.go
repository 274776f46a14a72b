package ipset

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
)

func entryStrings(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.String())
	}
	return out
}

func TestDiff(t *testing.T) {
	a := ipPort("10.0.0.1", inet.TCP, 80)
	b := ipPort("10.0.0.2", inet.TCP, 80)
	c := ipPort("10.0.0.3", inet.UDP, 53)
	commented := a
	commented.Comment = "svc"
	net1 := Entry{Net: netip.MustParsePrefix("10.1.2.3/16")}
	net1Masked := Entry{Net: netip.MustParsePrefix("10.1.0.0/16")}
	tests := []struct {
		name             string
		current, desired []Entry
		add, del         []Entry
	}{
		{"empty", nil, nil, nil, nil},
		{"fill", nil, []Entry{a, b}, []Entry{a, b}, nil},
		{"clear", []Entry{a, b}, nil, nil, []Entry{a, b}},
		{"same", []Entry{a, b}, []Entry{b, a}, nil, nil},
		{"change one", []Entry{a, b}, []Entry{a, c}, []Entry{c}, []Entry{b}},
		{"duplicates count once", nil, []Entry{a, a}, []Entry{a}, nil},
		{"comment change re-adds", []Entry{a}, []Entry{commented}, []Entry{commented}, nil},
		{"networks compare masked", []Entry{net1Masked}, []Entry{net1}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Diff(tt.current, tt.desired)
			if got, want := entryStrings(p.Add), entryStrings(tt.add); !slices.Equal(got, want) {
				t.Errorf("Add = %q, want %q", got, want)
			}
			if got, want := entryStrings(p.Delete), entryStrings(tt.del); !slices.Equal(got, want) {
				t.Errorf("Delete = %q, want %q", got, want)
			}
		})
	}
}

func TestDiffOnePercent(t *testing.T) {
	const n = 10000
	current := make([]Entry, n)
	desired := make([]Entry, n)
	for i := range n {
		current[i] = ipPort(fmt.Sprintf("10.%d.%d.1", i/256, i%256), inet.TCP, 80)
		desired[i] = current[i]
	}
	for i := 0; i < n; i += 100 {
		desired[i].Port = 81
	}
	p := Diff(current, desired)
	if len(p.Add) != n/100 || len(p.Delete) != n/100 {
		t.Errorf("%d adds and %d deletes, want %d each", len(p.Add), len(p.Delete), n/100)
	}
}

func TestTempName(t *testing.T) {
	for _, name := range []string{"a", "KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR", "0123456789012345678901234567890"} {
		tmp := TempName(name)
		if err := validName(tmp); err != nil || tmp == name {
			t.Errorf("TempName(%q) = %q: %v", name, tmp, err)
		}
	}
	if TempName("KUBE-LOAD-BALANCER-SOURCE-CIDR") == TempName("KUBE-LOAD-BALANCER-SOURCE-IP") {
		t.Error("two long names share a temporary name")
	}
}

func TestHashSizeFor(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want uint32
	}{{0, 1024}, {4096, 1024}, {20000, 8192}, {100000, 32768}} {
		if got := hashSizeFor(tt.n); got != tt.want {
			t.Errorf("hashSizeFor(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
