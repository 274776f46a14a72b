package dataplane

import (
	"reflect"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// The kernel gets what parsing an entry's printed form gave, and reading
// it back gives the same entry: a source range of one address included,
// which ipset prints without its /32.
func TestSetEntriesTranslate(t *testing.T) {
	vip, pod := fixture.IP("10.96.0.1"), fixture.IP("10.244.1.5")
	for _, tt := range []struct {
		typ planner.SetType
		e   plan.Entry
	}{
		{planner.HashIP, plan.Entry{Addr: vip}},
		{planner.HashIPPort, plan.Entry{Addr: vip, Protocol: inet.SCTP, Port: 3868}},
		{planner.HashIPPortIP, plan.Entry{Addr: pod, Protocol: inet.TCP, Port: 8080, Addr2: pod}},
		{planner.HashIPPortNet, plan.Entry{Addr: vip, Protocol: inet.UDP, Port: 53, Addr2: fixture.IP("192.168.0.0"), Bits2: 24}},
		{planner.HashIPPortNet, plan.Entry{Addr: vip, Protocol: inet.TCP, Port: 80, Addr2: fixture.IP("198.51.100.7"), Bits2: 32}},
		{planner.HashIPPortNet, plan.Entry{Addr: fixture.IP("fd00::1"), Protocol: inet.TCP, Port: 80, Addr2: fixture.IP("fd00:1::"), Bits2: 64}},
		{planner.BitmapPort, plan.Entry{Port: 30080}},
	} {
		parsed, err := ipset.ParseEntry(ipset.Type(tt.typ), tt.e.String())
		if err != nil {
			t.Fatalf("%s %s: %v", tt.typ, tt.e, err)
		}
		if got := ipsetEntry(tt.e); !reflect.DeepEqual(got, parsed) {
			t.Errorf("%s %s: sent %+v, parsing gives %+v", tt.typ, tt.e, got, parsed)
		}
		if back := entryFromIPSet(parsed); back != tt.e {
			t.Errorf("%s %s: read back as %s (%+v)", tt.typ, tt.e, back, back)
		}
	}
}
