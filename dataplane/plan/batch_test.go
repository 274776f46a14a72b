package plan

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/inet"
)

// A plan comes in phases of batches: IPVS operations in batches of at
// most ipvsBatchRequests requests, binds together, the rest one by one;
// its operations stay in phase order.
func TestPlanBatches(t *testing.T) {
	vk := func(i int) VirtualKey {
		return VirtualKey{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Protocol: inet.TCP}
	}
	reals := make(Reals, ipvsBatchRequests)
	for i := range reals {
		reals[i] = RealServer{RealKey: RealKey{Addr: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: 8080}, Weight: 1}
	}
	ops := []Op{
		Bind{Addr: fixture.IP("10.96.0.1")},
		AddReals{Virtual: vk(1), Reals: reals},
		AddVirtual{Virtual: VirtualServer{VirtualKey: vk(1), Scheduler: "rr"}},
		AddVirtual{Virtual: VirtualServer{VirtualKey: vk(2), Scheduler: "rr"}},
		AddReals{Virtual: vk(2), Reals: reals[:1]},
		Bind{Addr: fixture.IP("10.96.0.2")},
		CreateSet{Spec: SetSpec{Name: "A", Type: HashIP}},
		CreateSet{Spec: SetSpec{Name: "B", Type: HashIP}},
	}
	p := New(slices.Clone(ops)...)
	type shape struct {
		phase string
		kind  BatchKind
		ops   int
	}
	var got []shape
	for _, ph := range p.Phases {
		for _, b := range ph.Batches {
			got = append(got, shape{ph.Name, b.Kind, len(b.Ops)})
		}
	}
	want := []shape{
		{"sets", EachOp, 1}, {"sets", EachOp, 1},
		{"virtual", IPVSBatch, 2},
		// The first AddReals fills a batch; the second needs another.
		{"real", IPVSBatch, 1}, {"real", IPVSBatch, 1},
		{"bind", AddressBatch, 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("batches %v, want %v", got, want)
	}
	if p.Len() != len(ops) || p.Phases[1].Batches[0].Requests() != 2 || p.Phases[2].Batches[0].Requests() != len(reals) {
		t.Errorf("%d operations, requests %d and %d", p.Len(), p.Phases[1].Batches[0].Requests(), p.Phases[2].Batches[0].Requests())
	}
}
