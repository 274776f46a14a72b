package planner

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
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

// The additions of a diff against a state that is only partly known add
// what it holds and the kernel lacks, and change or remove nothing: not
// the services it does not hold yet, nor the real servers of a service
// whose endpoints are only partly listed, nor another virtual server's
// scheduler.
func TestAdditions(t *testing.T) {
	web := fixture.Svc("default", "web", "", inet.TCP, 80, "10.96.0.10")
	web.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.1", 8080, "node-a"), fixture.Ready("10.244.1.2", 8080, "node-a")}
	dns := fixture.Svc("kube-system", "dns", "", inet.UDP, 53, "10.96.0.53")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 53, "node-a")}
	kernel := Build(&model.State{Node: fixture.Node(), Services: []model.ServicePort{web, dns}}, nftrules.Render).Kernel

	// Listed so far: web with one endpoint it had and one new, a new
	// service, not dns; and web's scheduler changed.
	partialWeb := web
	partialWeb.Scheduler = "wrr"
	partialWeb.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 8080, "node-a"), fixture.Ready("10.244.1.3", 8080, "node-a")}
	api := fixture.Svc("default", "api", "", inet.TCP, 443, "10.96.0.20")
	api.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.7", 6443, "node-a")}
	d := Build(&model.State{Node: fixture.Node(), Services: []model.ServicePort{partialWeb, api}}, nftrules.Render)

	full := Diff(DiffInputs{Observed: kernel, Desired: d.Kernel, Services: d.Services, Scope: FullScope})
	add := full.Additions(nil)
	for op := range add.All() {
		switch op.(type) {
		case CreateSet, AddEntries, ReplaceRules, AddVirtual, AddReals, Bind:
		default:
			t.Errorf("not an addition: %s", op)
		}
	}
	got := add.String()
	for _, want := range []string{"ipvs add TCP 10.96.0.20:443", "10.244.1.3:8080", "addr bind 10.96.0.20"} {
		if !strings.Contains(got, want) {
			t.Errorf("additions lack %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"10.244.1.1", "10.96.0.53", "10.244.1.2", "ipvs edit"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("additions hold %q:\n%s", unwanted, got)
		}
	}
	if full.Len() <= add.Len() {
		t.Errorf("the diff has %d operations, its additions %d: nothing left out", full.Len(), add.Len())
	}
}
