//go:build hosttest

package dataplane

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/dataplane/internal/hostsets"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// writeRulesInNetNS creates every KUBE-* set in ns, adds entries (set
// name, entry as the ipset program spells it) and writes the fixture
// node's rules against those sets.
func writeRulesInNetNS(t *testing.T, ns *testutil.NetNS, entries [][2]string) {
	t.Helper()
	index := hostsets.Create(t, ns)
	for _, add := range entries {
		ns.Run(t, "ipset", "add", add[0], add[1])
	}
	conn, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	n := fixture.Node()
	if err := nftrules.Write(conn, &n, func(name string) (uint16, error) { return index[name], nil }); err != nil {
		t.Fatal(err)
	}
}

func TestRuleTablesLoadIntoTheKernel(t *testing.T) {
	testutil.RequireProgram(t, "nft")
	ns := testutil.NewNetNS(t)
	index := hostsets.Create(t, ns)
	conn, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	node := fixture.Node()
	for round := range 2 {
		if err := nftrules.Write(conn, &node, func(name string) (uint16, error) { return index[name], nil }); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for _, family := range []string{"ip", "ip6"} {
		out := ns.Run(t, "nft", "list", "table", family, nftrules.TableName)
		for _, want := range []string{
			"chain KUBE-SERVICES", "chain KUBE-POSTROUTING", "chain KUBE-MARK-MASQ",
			"type nat hook prerouting priority dstnat", "type filter hook output priority mangle",
			"xt match set", "masquerade fully-random", "meta mark set meta mark | 0x00004000",
			"fib daddr type local", "reject", `comment "kubernetes service traffic requiring SNAT"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("nft list table %s %s lacks %q:\n%s", family, nftrules.TableName, want, out)
			}
		}
	}
	// Each table replaced twice, never doubled.
	ns.Run(t, "nft", "add", "table", "ip", "someone-else")
	if out := ns.Run(t, "nft", "list", "tables"); strings.Count(out, nftrules.TableName) != 2 {
		t.Errorf("nft list tables:\n%s", out)
	}
	if err := nftrules.Delete(conn); err != nil {
		t.Fatal(err)
	}
	if out := ns.Run(t, "nft", "list", "tables"); out != "table ip someone-else\n" {
		t.Errorf("after DeleteRules, nft list tables:\n%s", out)
	}
}
