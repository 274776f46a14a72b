//go:build hosttest

package dataplane

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kube-proxy's IPVS-mode chains as iptables-nft writes them, with another
// program's chain and rules in the same tables, which must survive.
const kubeProxyIPTables = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:CNI-NAT - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A PREROUTING -j CNI-NAT
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -s 10.88.0.0/16 -j MASQUERADE
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A CNI-NAT -d 10.88.0.5/32 -j ACCEPT
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-PROXY-FIREWALL -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FIREWALL -d 127.0.0.0/8 -j DROP
COMMIT
`

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

// runWithInput runs a program with input on its standard input.
func runWithInput(name, input string) error {
	cmd := exec.Command(name)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, out)
	}
	return nil
}
