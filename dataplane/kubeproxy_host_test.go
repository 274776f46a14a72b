//go:build hosttest

package dataplane

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// TestRemoveKubeProxyChains loads kube-proxy's chains with the real
// iptables-nft and checks that exactly they, and the jumps to them, go.
func TestRemoveKubeProxyChains(t *testing.T) {
	for _, p := range []string{"iptables-restore", "iptables-save"} {
		testutil.RequireProgram(t, p)
	}
	ns := testutil.NewNetNS(t)
	restore := func() {
		if err := ns.Do(func() error { return runWithInput("iptables-restore", kubeProxyIPTables) }); err != nil {
			t.Fatal(err)
		}
	}
	restore()
	conn, found := kubeProxyChainsIn(t, ns)
	var names []string
	for _, c := range found {
		names = append(names, c.String())
	}
	want := []string{
		"ip filter KUBE-FORWARD", "ip filter KUBE-IPVS-FILTER", "ip filter KUBE-IPVS-OUT-FILTER", "ip filter KUBE-NODE-PORT",
		"ip filter KUBE-PROXY-FIREWALL", "ip filter KUBE-SOURCE-RANGES-FIREWALL",
		"ip nat KUBE-LOAD-BALANCER", "ip nat KUBE-MARK-MASQ", "ip nat KUBE-NODE-PORT", "ip nat KUBE-POSTROUTING", "ip nat KUBE-SERVICES",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("found %v\nwant %v", names, want)
	}
	if err := removeKubeProxyChains(conn, found); err != nil {
		t.Fatal(err)
	}
	saved := ns.Run(t, "iptables-save")
	for _, line := range strings.Split(saved, "\n") {
		if strings.Contains(line, "KUBE-") && !strings.Contains(line, "KUBE-FIREWALL") {
			t.Errorf("left: %s", line)
		}
	}
	for _, keep := range []string{
		"-A PREROUTING -j CNI-NAT", "-A POSTROUTING -s 10.88.0.0/16 -j MASQUERADE", "-A CNI-NAT -d 10.88.0.5/32 -j ACCEPT",
		"-A INPUT -j KUBE-FIREWALL", "-A KUBE-FIREWALL -d 127.0.0.0/8 -j DROP",
	} {
		if !strings.Contains(saved, keep+"\n") {
			t.Errorf("another program's rule went: %s\n%s", keep, saved)
		}
	}
	if again, err := findKubeProxyChains(conn); err != nil || len(again) != 0 {
		t.Errorf("after removal: %v, %v", again, err)
	}

	// A rule of another program that jumps into kube-proxy's chain with
	// a condition is not touched; the chain's removal fails and says why.
	restore()
	ns.Run(t, "iptables", "-t", "nat", "-A", "CNI-NAT", "-p", "tcp", "-j", "KUBE-MARK-MASQ")
	_, found = kubeProxyChainsIn(t, ns)
	if err := removeKubeProxyChains(conn, found); err == nil || !strings.Contains(err.Error(), "another program's rule") {
		t.Errorf("removal with a foreign reference: %v", err)
	}
	if saved := ns.Run(t, "iptables-save", "-t", "nat"); !strings.Contains(saved, "-A CNI-NAT -p tcp -j KUBE-MARK-MASQ") {
		t.Errorf("the foreign rule went:\n%s", saved)
	}
}

// TestRemoveKubeProxyModesLeftovers loads what kube-proxy's iptables mode
// (with iptables-nft, both families) and nftables mode leave on a node,
// among other programs' rules, and checks with the real programs that
// exactly kube-proxy's chains, jumps and tables go: other chains and
// tables keep every rule, and iptables-legacy's tables, which nftables
// cannot see, are untouched.
func TestRemoveKubeProxyModesLeftovers(t *testing.T) {
	for _, p := range []string{"iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save", "nft", "iptables-legacy-restore", "iptables-legacy-save"} {
		testutil.RequireProgram(t, p)
	}
	ns := testutil.NewNetNS(t)
	for _, load := range []struct{ program, file string }{
		{"iptables-restore", "iptables-mode.v4"}, {"ip6tables-restore", "iptables-mode.v6"}, {"iptables-legacy-restore", "iptables-mode.v4"},
	} {
		if err := ns.Do(func() error { return runWithInput(load.program, readLeftovers(t, load.file)) }); err != nil {
			t.Fatal(err)
		}
	}
	ns.Run(t, "nft", "-f", "testdata/kube-proxy-leftovers/nftables-mode.nft")
	before := map[string]string{}
	for _, p := range []string{"iptables-save", "ip6tables-save", "iptables-legacy-save"} {
		before[p] = saved(t, ns, p)
	}
	conn, found := kubeProxyChainsIn(t, ns)
	names := map[string]bool{}
	for _, c := range found {
		names[c.String()] = true
	}
	for _, want := range []string{"table ip kube-proxy", "table ip6 kube-proxy", "ip nat KUBE-SVC-XPGD46QRK7WJZT7O", "ip nat KUBE-SEP-C6EBXVWJJZMIWKLZ",
		"ip nat KUBE-FW-4HXBLDMN2JPYAU5Q", "ip nat KUBE-EXT-4HXBLDMN2JPYAU5Q", "ip nat KUBE-SVL-4HXBLDMN2JPYAU5Q", "ip nat KUBE-NODEPORTS",
		"ip filter KUBE-SERVICES", "ip filter KUBE-EXTERNAL-SERVICES", "ip mangle KUBE-PROXY-CANARY", "ip6 nat KUBE-SEP-GD2LDVTGRXWXSWFA", "ip6 filter KUBE-NODEPORTS"} {
		if !names[want] {
			t.Errorf("not found: %s", want)
		}
	}
	for name := range names {
		if strings.Contains(name, "CNI-") || strings.Contains(name, "DOCKER") || strings.Contains(name, "KUBELET") ||
			strings.HasSuffix(name, "KUBE-FIREWALL") || strings.Contains(name, "extra") || strings.Contains(name, "neighbour") {
			t.Errorf("another program's chain or table found: %s", name)
		}
	}
	if err := removeKubeProxyChains(conn, found); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"iptables-save", "ip6tables-save"} {
		if got, want := saved(t, ns, p), withoutKubeProxy(before[p]); got != want {
			t.Errorf("%s after the removal:\n%s\nwant:\n%s", p, got, want)
		}
	}
	if got := saved(t, ns, "iptables-legacy-save"); got != before["iptables-legacy-save"] {
		t.Errorf("iptables-legacy's tables changed:\n%s\nwas:\n%s", got, before["iptables-legacy-save"])
	}
	ruleset := ns.Run(t, "nft", "list", "ruleset")
	for _, gone := range []string{"table ip kube-proxy {", "table ip6 kube-proxy {"} {
		if strings.Contains(ruleset, gone) {
			t.Errorf("%s is left:\n%s", gone, ruleset)
		}
	}
	for _, kept := range []string{"table inet neighbour {", "tcp dport 22 accept", "table ip kube-proxy-extra {", "ip daddr 192.0.2.1 dnat to 10.0.0.1"} {
		if !strings.Contains(ruleset, kept) {
			t.Errorf("another program's %q went:\n%s", kept, ruleset)
		}
	}
	if again, err := findKubeProxyChains(conn); err != nil || len(again) != 0 {
		t.Errorf("after removal: %v, %v", again, err)
	}
}

// TestRemoveKubeProxyChainsTableByTable checks that another program's
// reference into kube-proxy's nat chains keeps only the nat table's: the
// filter table's chains and the nftables-mode table still go.
func TestRemoveKubeProxyChainsTableByTable(t *testing.T) {
	for _, p := range []string{"iptables-restore", "iptables-save", "nft"} {
		testutil.RequireProgram(t, p)
	}
	ns := testutil.NewNetNS(t)
	if err := ns.Do(func() error { return runWithInput("iptables-restore", readLeftovers(t, "iptables-mode.v4")) }); err != nil {
		t.Fatal(err)
	}
	ns.Run(t, "nft", "-f", "testdata/kube-proxy-leftovers/nftables-mode.nft")
	ns.Run(t, "iptables", "-t", "nat", "-A", "DOCKER", "-p", "tcp", "-j", "KUBE-MARK-MASQ")
	conn, found := kubeProxyChainsIn(t, ns)
	err := removeKubeProxyChains(conn, found)
	if err == nil || !strings.Contains(err.Error(), "another program's rule") || !strings.Contains(err.Error(), "ip nat KUBE-MARK-MASQ") {
		t.Errorf("removal with a foreign reference: %v", err)
	}
	left, err := findKubeProxyChains(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range left {
		if c.Table != "nat" || c.Family == inet.IPv6 {
			t.Errorf("%s is left", c)
		}
	}
	if nat := ns.Run(t, "iptables-save", "-t", "nat"); !strings.Contains(nat, "-A DOCKER -p tcp -j KUBE-MARK-MASQ") || !strings.Contains(nat, "-j KUBE-SVC-XPGD46QRK7WJZT7O") {
		t.Errorf("the nat table changed:\n%s", nat)
	}
}

// TestRemoveKubeProxyJumpNativeCtState checks that a jump behind a native
// ct state test, as newer iptables-nft writes kube-proxy's --ctstate NEW,
// goes with the chain it jumps to.
func TestRemoveKubeProxyJumpNativeCtState(t *testing.T) {
	for _, p := range []string{"iptables", "nft"} {
		testutil.RequireProgram(t, p)
	}
	ns := testutil.NewNetNS(t)
	ns.Run(t, "iptables", "-N", "KUBE-SERVICES")
	ns.Run(t, "nft", "add chain ip filter OUTPUT { type filter hook output priority 0 ; }")
	ns.Run(t, "nft", "add", "rule", "ip", "filter", "OUTPUT", "ct", "state", "new", "counter", "jump", "KUBE-SERVICES")
	ns.Run(t, "nft", "add", "rule", "ip", "filter", "OUTPUT", "ct", "mark", "1", "counter", "jump", "KUBE-SERVICES")
	conn, found := kubeProxyChainsIn(t, ns)
	// A ct mark test is another program's condition: the chain stays.
	if err := removeKubeProxyChains(conn, found); err == nil {
		t.Errorf("removed with a conditional foreign jump:\n%s", ns.Run(t, "nft", "list", "table", "ip", "filter"))
	}
	ns.Run(t, "nft", "flush", "chain", "ip", "filter", "OUTPUT")
	ns.Run(t, "nft", "add", "rule", "ip", "filter", "OUTPUT", "ct", "state", "new", "counter", "jump", "KUBE-SERVICES")
	if err := removeKubeProxyChains(conn, found); err != nil {
		t.Fatal(err)
	}
	if table := ns.Run(t, "nft", "list", "table", "ip", "filter"); strings.Contains(table, "KUBE-SERVICES") {
		t.Errorf("left:\n%s", table)
	}
}

// kubeProxyChainsIn returns a connection into ns and the kube-proxy
// chains and tables found there.
func kubeProxyChainsIn(t *testing.T, ns *testutil.NetNS) (*nftables.Conn, []planner.KubeProxyChain) {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	found, err := findKubeProxyChains(conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, found
}

// saved returns a save program's output without its comments, which
// carry the time.
func saved(t *testing.T, ns *testutil.NetNS, program string) string {
	t.Helper()
	var out []string
	for _, line := range strings.SplitAfter(ns.Run(t, program), "\n") {
		if !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// withoutKubeProxy returns iptables-save's output without kube-proxy's
// chains, their rules and the rules that only jump to them.
func withoutKubeProxy(saved string) string {
	var out []string
	table := ""
	for _, line := range strings.SplitAfter(saved, "\n") {
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, ":") && plan.IsKubeProxyChain(table, fields[0][1:]):
			continue
		case strings.HasPrefix(line, "-A ") && plan.IsKubeProxyChain(table, fields[1]):
			continue
		case strings.HasPrefix(line, "-A ") && plan.IsKubeProxyChain(table, fields[len(fields)-1]) && fields[len(fields)-2] == "-j":
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "")
}
