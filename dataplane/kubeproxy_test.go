package dataplane

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// A node taken over from kube-proxy: its chains are removed last, after
// ipvsplane's rules and everything else, and only then.
func TestDiffRemovesKubeProxyChainsLast(t *testing.T) {
	state := &model.State{Node: fixture.Node(), Services: []model.ServicePort{fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.20")}}
	desired := plan.Build(state, nftrules.Render)
	chains := []planner.KubeProxyChain{{Table: "nat", Chain: "KUBE-SERVICES"}, {Family: inet.IPv6, Table: "filter", Chain: "KUBE-FORWARD"}}
	observed := plan.NewKernelState()
	observed.KubeProxyChains = chains
	pl := planner.Diff(planner.DiffInputs{Observed: observed, Desired: desired.Kernel, Services: desired.Services, Scope: planner.FullScope})
	ops := slices.Collect(pl.All())
	last := ops[len(ops)-1]
	if got, want := last.String(), "kube-proxy remove ip nat KUBE-SERVICES, ip6 filter KUBE-FORWARD"; got != want {
		t.Fatalf("last op %q, want %q\n%s", got, want, pl)
	}
	for _, op := range ops[:len(ops)-1] {
		if _, ok := op.(plan.RemoveKubeProxyRules); ok {
			t.Fatalf("removed twice:\n%s", pl)
		}
	}
	observed.Record(last)
	if len(observed.KubeProxyChains) != 0 {
		t.Errorf("recorded state still has %v", observed.KubeProxyChains)
	}
	// Only a full plan looks for them.
	observed.KubeProxyChains = chains
	partial := planner.Diff(planner.DiffInputs{Observed: observed, Desired: desired.Kernel, Services: desired.Services, Scope: planner.Scope{}})
	for op := range partial.All() {
		if _, ok := op.(plan.RemoveKubeProxyRules); ok {
			t.Errorf("an incremental plan removes kube-proxy's chains:\n%s", partial)
		}
	}
}

func TestOnlyJumpsTo(t *testing.T) {
	kube := map[string]bool{"KUBE-SERVICES": true}
	jump := &expr.Verdict{Kind: expr.VerdictJump, Chain: "KUBE-SERVICES"}
	for _, tc := range []struct {
		name  string
		exprs []expr.Any
		want  bool
	}{
		{"counter and jump", []expr.Any{&expr.Counter{}, jump}, true},
		{"comment match and jump", []expr.Any{&expr.Match{Name: "comment"}, jump}, true},
		{"goto", []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: "KUBE-SERVICES"}}, true},
		{"jump elsewhere", []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "CNI-NAT"}}, false},
		{"condition", []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{6}}, jump}, false},
		{"other match", []expr.Any{&expr.Match{Name: "addrtype"}, jump}, false},
		{"accept", []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}, false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := onlyJumpsTo(&nftables.Rule{Exprs: tc.exprs}, func(c string) bool { return kube[c] }); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Node ports are served on every address of the node, as kube-proxy's IPVS
// mode serves them, whatever the Node object says; a load balancer's
// source ranges let the node through when they hold its primary IP, the
// Node object's first of the family, or without one the family's loopback
// address (kube-proxy's detectNodeIPs).
func TestNodeAddressesAndNodeIPs(t *testing.T) {
	np := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.20")
	np.NodePort = 30080
	np.LoadBalancerIPs = fixture.IPs("192.0.2.10")
	np.LoadBalancerSourceRanges = fixture.Prefixes("10.1.0.0/16")
	for _, tc := range []struct {
		name          string
		addrs, nodeIP []netip.Addr
		nodePorts     []string
		sourceIP      bool
	}{
		{"interfaces", fixture.IPs("192.168.0.10", "10.1.0.1"), nil, []string{"192.168.0.10", "10.1.0.1"}, false},
		{"no IPv4 node IP", fixture.IPs("192.168.0.10", "10.1.0.1"), fixture.IPs("2001:db8::5"), []string{"192.168.0.10", "10.1.0.1"}, false},
		{"primary outside the range", fixture.IPs("192.168.0.10", "10.1.0.1"), fixture.IPs("192.168.0.10", "10.1.0.1"), []string{"192.168.0.10", "10.1.0.1"}, false},
		{"primary inside the range", fixture.IPs("192.168.0.10", "10.1.0.1"), fixture.IPs("10.1.0.1"), []string{"192.168.0.10", "10.1.0.1"}, true},
		{"an ExternalIP not on the node", fixture.IPs("192.168.0.10"), fixture.IPs("192.168.0.10", "203.0.113.5"), []string{"192.168.0.10"}, false},
		{"no interface addresses", nil, fixture.IPs("10.1.0.1"), []string{"10.1.0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := fixture.Node()
			node.Addresses, node.NodeIPs = tc.addrs, tc.nodeIP
			d := plan.Build(&model.State{Node: node, Services: []model.ServicePort{np}}, nftrules.Render)
			var got []string
			for vk := range d.Kernel.Virtual {
				if vk.Port == 30080 {
					got = append(got, vk.Addr.String())
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.nodePorts))
			if !slices.Equal(got, want) {
				t.Errorf("node ports on %v, want %v", got, want)
			}
			if has := d.Kernel.Entries[model.SetLoadBalancerSourceIP][plan.Entry{Addr: fixture.IP("192.0.2.10"), Protocol: inet.TCP, Port: 80, Addr2: fixture.IP("192.0.2.10")}]; has != tc.sourceIP {
				t.Errorf("KUBE-LOAD-BALANCER-SOURCE-IP entry: %v, want %v", has, tc.sourceIP)
			}
		})
	}
}
