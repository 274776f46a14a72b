package planner

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// Endpoint selection follows kube-proxy's CategorizeEndpoints
// (pkg/proxy/topology.go), run per family as its proxier per family runs
// it.
// chosen is the addresses of the endpoints chosen, IPv4 and IPv6 each.
type chosen struct{ Cluster, Local [2][]string }

// endpointsCase is endpoints and those chosen for node-a in zone-a.
type endpointsCase struct {
	name string
	eps  []model.Endpoint
	want chosen
}

func endpointsCases() []endpointsCase {
	terminating := func(addr, node string) model.Endpoint {
		return model.Endpoint{Addr: fixture.IP(addr), Port: 80, Serving: true, Terminating: true, NodeName: node}
	}
	notServing := func(addr, node string) model.Endpoint {
		return model.Endpoint{Addr: fixture.IP(addr), Port: 80, Terminating: true, NodeName: node}
	}
	zones := func(ep model.Endpoint, z ...string) model.Endpoint { ep.Hints = &model.Hints{ForZones: z}; return ep }
	nodes := func(ep model.Endpoint, zone string, n ...string) model.Endpoint {
		ep.Hints = &model.Hints{ForZones: []string{zone}, ForNodes: n}
		return ep
	}
	r := func(addr, node string) model.Endpoint { return fixture.Ready(addr, 80, node) }
	return []endpointsCase{{
		name: "ready endpoints; local ones for Local",
		eps:  []model.Endpoint{r("10.0.0.1", "node-a"), r("10.0.0.2", "node-b"), terminating("10.0.0.3", "node-a")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1", "10.0.0.2"}}, Local: [2][]string{{"10.0.0.1"}}},
	}, {
		name: "no ready endpoint: the serving and terminating ones, not the others",
		eps:  []model.Endpoint{terminating("10.0.0.1", "node-b"), notServing("10.0.0.2", "node-a"), terminating("10.0.0.3", "node-a")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1", "10.0.0.3"}}, Local: [2][]string{{"10.0.0.3"}}},
	}, {
		name: "Local falls back to local serving endpoints while remote ones are ready",
		eps:  []model.Endpoint{r("10.0.0.1", "node-b"), terminating("10.0.0.2", "node-a")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}}, Local: [2][]string{{"10.0.0.2"}}},
	}, {
		name: "zone hints narrow the ready endpoints",
		eps:  []model.Endpoint{zones(r("10.0.0.1", "node-b"), "zone-a"), zones(r("10.0.0.2", "node-c"), "zone-b")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}}},
	}, {
		// Issue 15 §1.5: kube-proxy decides topology from ready
		// endpoints only and ignores it for the fallback.
		name: "the serving-terminating fallback ignores zone hints",
		eps:  []model.Endpoint{zones(terminating("10.0.0.1", "node-b"), "zone-a"), zones(terminating("10.0.0.2", "node-c"), "zone-b")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1", "10.0.0.2"}}},
	}, {
		name: "hints are read from ready endpoints only",
		eps: []model.Endpoint{zones(r("10.0.0.1", "node-b"), "zone-a"), zones(r("10.0.0.2", "node-c"), "zone-b"),
			{Addr: fixture.IP("10.0.0.3"), Port: 80, NodeName: "node-d"}},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}}},
	}, {
		name: "an unhinted ready endpoint turns hints off",
		eps:  []model.Endpoint{zones(r("10.0.0.1", "node-b"), "zone-a"), r("10.0.0.2", "node-c")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1", "10.0.0.2"}}},
	}, {
		name: "no hint for this zone turns hints off",
		eps:  []model.Endpoint{zones(r("10.0.0.1", "node-b"), "zone-b"), zones(r("10.0.0.2", "node-c"), "zone-c")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1", "10.0.0.2"}}},
	}, {
		// Issue 15 §2: trafficDistribution PreferSameNode.
		name: "node hints naming this node come before zone hints",
		eps: []model.Endpoint{nodes(r("10.0.0.1", "node-a"), "zone-a", "node-a"), nodes(r("10.0.0.2", "node-b"), "zone-a", "node-b"),
			nodes(r("10.0.0.3", "node-c"), "zone-b", "node-c")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}}, Local: [2][]string{{"10.0.0.1"}}},
	}, {
		name: "node hints not naming this node: zone hints",
		eps:  []model.Endpoint{nodes(r("10.0.0.2", "node-b"), "zone-a", "node-b"), nodes(r("10.0.0.3", "node-c"), "zone-b", "node-c")},
		want: chosen{Cluster: [2][]string{{"10.0.0.2"}}},
	}, {
		name: "node hints on some ready endpoints only: zone hints",
		eps:  []model.Endpoint{nodes(r("10.0.0.1", "node-a"), "zone-b", "node-a"), zones(r("10.0.0.2", "node-b"), "zone-a")},
		want: chosen{Cluster: [2][]string{{"10.0.0.2"}}, Local: [2][]string{{"10.0.0.1"}}},
	}, {
		// Issue 15 §1.14: kube-proxy runs one proxier per family.
		name: "dual-stack: each family falls back on its own",
		eps:  []model.Endpoint{terminating("10.0.0.1", "node-a"), r("fd00::1", "node-b"), terminating("fd00::2", "node-a")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}, {"fd00::1"}}, Local: [2][]string{{"10.0.0.1"}, {"fd00::2"}}},
	}, {
		name: "dual-stack: each family decides its hints",
		eps: []model.Endpoint{zones(r("10.0.0.1", "node-b"), "zone-a"), zones(r("10.0.0.2", "node-c"), "zone-b"),
			r("fd00::1", "node-b"), r("fd00::2", "node-c")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}, {"fd00::1", "fd00::2"}}},
	}, {
		name: "dual-stack, families interleaved",
		eps:  []model.Endpoint{r("fd00::1", "node-a"), r("10.0.0.1", "node-a"), r("fd00::2", "node-b")},
		want: chosen{Cluster: [2][]string{{"10.0.0.1"}, {"fd00::1", "fd00::2"}}, Local: [2][]string{{"10.0.0.1"}, {"fd00::1"}}},
	}}
}

// byPolicy runs endpointsByPolicy over eps for each traffic policy: the
// endpoints a Cluster policy uses, and those a Local one uses.
func byPolicy(n *model.Node, eps []model.Endpoint) (cluster, local inet.PerFamily[[]model.Endpoint]) {
	sp := model.ServicePort{Endpoints: eps}
	cluster, _ = endpointsByPolicy(n, &sp)
	sp.InternalPolicy = model.PolicyLocal
	local, _ = endpointsByPolicy(n, &sp)
	return cluster, local
}

func TestEndpointsByPolicy(t *testing.T) {
	n := fixture.Node()
	for _, tt := range endpointsCases() {
		t.Run(tt.name, func(t *testing.T) {
			cluster, local := byPolicy(&n, tt.eps)
			addrs := func(byFamily inet.PerFamily[[]model.Endpoint]) (out [2][]string) {
				for f, eps := range byFamily {
					for _, ep := range eps {
						out[f] = append(out[f], ep.Addr.String())
					}
				}
				return out
			}
			got := chosen{Cluster: addrs(cluster), Local: addrs(local)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chosen endpoints (-want +got):\n%s", diff)
			}
			// An external policy Local takes a family's local endpoints,
			// or the cluster's when it has none there.
			_, external := endpointsByPolicy(&n, &model.ServicePort{Endpoints: tt.eps, ExternalPolicy: model.PolicyLocal})
			var want [2][]string
			for f := range want {
				if want[f] = tt.want.Local[f]; len(want[f]) == 0 {
					want[f] = tt.want.Cluster[f]
				}
			}
			if diff := cmp.Diff(want, addrs(external)); diff != "" {
				t.Errorf("external policy Local (-want +got):\n%s", diff)
			}
		})
	}
}

// The common case, every endpoint ready and no hints, costs no copy.
func TestEndpointsByPolicySharesTheList(t *testing.T) {
	eps := []model.Endpoint{fixture.Ready("10.0.0.1", 80, "node-a"), fixture.Ready("fd00::1", 80, "node-b")}
	n := fixture.Node()
	sp := model.ServicePort{Endpoints: eps}
	allocs := testing.AllocsPerRun(100, func() {
		cluster, _ := endpointsByPolicy(&n, &sp)
		if len(cluster[0]) != 1 || len(cluster[1]) != 1 || &cluster[0][0] != &eps[0] {
			t.Fatal("the list was copied")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
	if !slices.Equal(eps, []model.Endpoint{fixture.Ready("10.0.0.1", 80, "node-a"), fixture.Ready("fd00::1", 80, "node-b")}) {
		t.Error("the input was changed")
	}
}
