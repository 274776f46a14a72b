//go:build hosttest

package dataplane

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
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
	conn, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	found, err := findKubeProxyChains(conn)
	if err != nil {
		t.Fatal(err)
	}
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
	found, err = findKubeProxyChains(conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeKubeProxyChains(conn, found); err == nil || !strings.Contains(err.Error(), "another program's rule") {
		t.Errorf("removal with a foreign reference: %v", err)
	}
	if saved := ns.Run(t, "iptables-save", "-t", "nat"); !strings.Contains(saved, "-A CNI-NAT -p tcp -j KUBE-MARK-MASQ") {
		t.Errorf("the foreign rule went:\n%s", saved)
	}
}
