//go:build vmtest

package dataplane

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// A node handed over and taken back: a dataplane programs the node and
// hands it over (its tables and ownership sets go, the rest stays, as
// kube-proxy would find it after `ipvsplane cleanup --handover`);
// kube-proxy's chains are loaded with iptables-nft; a new dataplane then
// takes the node over. Its first sync must adopt every virtual and real
// server (none added, updated or deleted: their connection counters keep
// counting), keep the device and its addresses, write its own tables and
// remove kube-proxy's chains last, and only them.
func TestDataplaneTakesOverFromKubeProxy(t *testing.T) {
	testutil.RequireProgram(t, "iptables-restore")
	testutil.RequireProgram(t, "iptables-save")
	n := setupNet(t)
	ctx := context.Background()
	state := &model.State{Node: vmNode(), Services: vmServices()}
	first := newDataplane(t, n.node)
	mustSync(t, first, state)
	if _, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second); err != nil {
		t.Fatalf("through the first dataplane: %v", err)
	}
	before := realServerConnections(t, first)
	if err := first.Handover(ctx); err != nil {
		t.Fatalf("handover: %v", err)
	}
	if out := n.node.Run(t, "nft", "list", "tables"); strings.Contains(out, nftrules.TableName) {
		t.Errorf("ipvsplane's tables after the handover:\n%s", out)
	}
	if out := n.node.Run(t, "ipset", "list", "-n"); strings.Contains(out, model.SetOwned) || !strings.Contains(out, model.SetClusterIP) {
		t.Errorf("sets after the handover:\n%s", out)
	}
	if err := n.node.Do(func() error { return runWithInput("iptables-restore", kubeProxyIPTables) }); err != nil {
		t.Fatal(err)
	}

	second := newDataplane(t, n.node)
	res := mustSync(t, second, state)
	kinds := map[string]int{}
	for op := range res.Plan.All() {
		kind := strings.Fields(op.String())[0] + " " + strings.Fields(op.String())[1]
		kinds[kind]++
		switch op.(type) {
		case plan.CreateSet, plan.AddEntries, plan.ReplaceRules, plan.RemoveKubeProxyRules:
		default:
			t.Errorf("the takeover plan holds %s", op)
		}
	}
	t.Logf("takeover plan: %v", kinds)
	if ops := slices.Collect(res.Plan.All()); len(ops) == 0 || !isRemoveKubeProxy(ops[len(ops)-1]) {
		t.Errorf("kube-proxy's chains are not removed last:\n%s", res.Plan)
	}
	saved := n.node.Run(t, "iptables-save")
	for _, line := range strings.Split(saved, "\n") {
		if strings.Contains(line, "KUBE-") && !strings.Contains(line, "KUBE-FIREWALL") {
			t.Errorf("kube-proxy's rule left: %s", line)
		}
	}
	for _, keep := range []string{"-A PREROUTING -j CNI-NAT", "-A INPUT -j KUBE-FIREWALL", "-A CNI-NAT -d 10.88.0.5/32 -j ACCEPT"} {
		if !strings.Contains(saved, keep+"\n") {
			t.Errorf("another program's rule went: %s", keep)
		}
	}
	after := realServerConnections(t, second)
	for rs, n := range before {
		if after[rs] < n {
			t.Errorf("real server %s: %d connections before the takeover, %d after: recreated", rs, n, after[rs])
		}
	}
	if _, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second); err != nil {
		t.Errorf("after the takeover: %v", err)
	}
	if res := mustSync(t, second, state); res.Plan.Len() != 0 {
		t.Errorf("the sync after the takeover plans:\n%s", res.Plan)
	}
}

// realServerConnections returns the connections each real server of the
// dataplane's namespace has scheduled since it was created.
func realServerConnections(t *testing.T, d *Dataplane) map[string]uint64 {
	t.Helper()
	table, err := d.k.ipvs.Table(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, vs := range table {
		for _, rs := range vs.Destinations {
			out[vsKey(vs.Service)+" -> "+netip.AddrPortFrom(rs.Addr, rs.Port).String()] = rs.Stats.Connections
		}
	}
	return out
}

func vsKey(s ipvs.Service) string {
	v, _ := virtualFromIPVS(s)
	return v.VirtualKey.String()
}

func isRemoveKubeProxy(op plan.Op) bool {
	_, ok := op.(plan.RemoveKubeProxyRules)
	return ok
}

// A node whose kube-proxy ran in iptables mode and then in nftables mode:
// both left rules that DNAT 10.96.0.10:80 to stale endpoints, one of
// which (10.244.1.3) is gone. ipvsplane's first sync removes them, last,
// with its own rules in place, so every connection reaches the Service's
// real servers; other programs' chains and tables stay. Cleanup then
// removes what kube-proxy left again, as kube-proxy's --cleanup does.
func TestDataplaneRemovesKubeProxyModesLeftovers(t *testing.T) {
	for _, p := range []string{"iptables-restore", "iptables-save", "nft"} {
		testutil.RequireProgram(t, p)
	}
	n := setupNet(t)
	load := func() {
		t.Helper()
		if err := n.node.Do(func() error { return runWithInput("iptables-restore", readLeftovers(t, "iptables-mode.v4")) }); err != nil {
			t.Fatal(err)
		}
		n.node.Run(t, "nft", "-f", "testdata/kube-proxy-leftovers/nftables-mode.nft")
	}
	load()
	state := &model.State{Node: vmNode(), Services: vmServices()}
	d := newDataplane(t, n.node)
	res := mustSync(t, d, state)
	if ops := slices.Collect(res.Plan.All()); len(ops) == 0 || !isRemoveKubeProxy(ops[len(ops)-1]) {
		t.Errorf("kube-proxy's leftovers are not removed last:\n%s", res.Plan)
	}
	checkNoKubeProxy := func(when string) {
		t.Helper()
		saved := n.node.Run(t, "iptables-save")
		for _, line := range strings.Split(saved, "\n") {
			if strings.Contains(line, "KUBE-") && !strings.Contains(line, "KUBE-FIREWALL") && !strings.Contains(line, "KUBE-KUBELET-CANARY") {
				t.Errorf("%s: kube-proxy's rule left: %s", when, line)
			}
		}
		for _, keep := range []string{"-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT", "-A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
			"-A INPUT -j KUBE-FIREWALL", ":KUBE-KUBELET-CANARY - [0:0]"} {
			if !strings.Contains(saved, keep+"\n") {
				t.Errorf("%s: another program's rule went: %s", when, keep)
			}
		}
		ruleset := n.node.Run(t, "nft", "list", "ruleset")
		if strings.Contains(ruleset, "table ip kube-proxy {") || strings.Contains(ruleset, "table ip6 kube-proxy {") {
			t.Errorf("%s: kube-proxy's nftables tables left", when)
		}
		if !strings.Contains(ruleset, "table inet neighbour {") || !strings.Contains(ruleset, "table ip kube-proxy-extra {") {
			t.Errorf("%s: another program's table went:\n%s", when, ruleset)
		}
	}
	checkNoKubeProxy("after the first sync")
	reached := map[string]int{}
	for range 20 {
		reply, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second)
		if err != nil {
			t.Fatalf("10.96.0.10:80 after the takeover: %v", err)
		}
		reached[strings.Fields(reply)[0]]++
	}
	if len(reached) != 2 {
		t.Errorf("10.96.0.10:80 reached %v, want both backends", reached)
	}

	load()
	if err := d.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkNoKubeProxy("after Cleanup")
}
