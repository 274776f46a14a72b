//go:build hosttest

package dataplane

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// natNeighbour is another program's nat rules that DNAT every local
// destination on a port to a pod, as the CNI portmap plugin does for a
// hostPort and Docker does for a published port.
type natNeighbour struct {
	name    string
	program string
	cmds    [][]string
}

// hostPortTo and hostPortTo6 are the pod a neighbour's rules send port
// 443 to.
const (
	hostPortTo  = "10.244.0.5:443"
	hostPortTo6 = "[fd00:244::5]:443"
)

func natNeighbours() []natNeighbour {
	// portmap's chains: CNI-HOSTPORT-DNAT from PREROUTING and OUTPUT for
	// local destinations, one chain per container under it.
	portmap := func(iptables, to string) [][]string {
		return [][]string{
			{iptables, "-t", "nat", "-N", "CNI-HOSTPORT-DNAT"},
			{iptables, "-t", "nat", "-N", "CNI-DN-1234"},
			{iptables, "-t", "nat", "-A", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
			{iptables, "-t", "nat", "-A", "OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "CNI-HOSTPORT-DNAT"},
			{iptables, "-t", "nat", "-A", "CNI-HOSTPORT-DNAT", "-p", "tcp", "-m", "multiport", "--dports", "443", "-j", "CNI-DN-1234"},
			{iptables, "-t", "nat", "-A", "CNI-DN-1234", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", to},
		}
	}
	docker := func(iptables, to string) [][]string {
		return [][]string{
			{iptables, "-t", "nat", "-N", "DOCKER"},
			{iptables, "-t", "nat", "-A", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"},
			{iptables, "-t", "nat", "-A", "OUTPUT", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"},
			{iptables, "-t", "nat", "-A", "DOCKER", "!", "-i", "docker0", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", to},
		}
	}
	table := func(family, to string) [][]string {
		return [][]string{
			{"nft", "add table " + family + " neighbour"},
			{"nft", "add chain " + family + " neighbour prerouting { type nat hook prerouting priority -100; }"},
			{"nft", "add chain " + family + " neighbour output { type nat hook output priority -100; }"},
			{"nft", "add rule " + family + " neighbour prerouting fib daddr type local tcp dport 443 dnat to " + to},
			{"nft", "add rule " + family + " neighbour output fib daddr type local tcp dport 443 dnat to " + to},
		}
	}
	return []natNeighbour{
		{"portmap on iptables-nft", "iptables-nft", slices.Concat(portmap("iptables-nft", hostPortTo), portmap("ip6tables-nft", hostPortTo6))},
		{"portmap on iptables-legacy", "iptables-legacy", slices.Concat(portmap("iptables-legacy", hostPortTo), portmap("ip6tables-legacy", hostPortTo6))},
		{"docker on iptables-nft", "iptables-nft", slices.Concat(docker("iptables-nft", hostPortTo), docker("ip6tables-nft", hostPortTo6))},
		{"an nftables table at dstnat", "nft", slices.Concat(table("ip", hostPortTo), table("ip6", hostPortTo6))},
	}
}

// Another program's nat rules for local destinations never see a
// connection to a virtual address: ipvsplane's nat chain runs ahead of
// them and claims it with a binding, as kube-proxy's ACCEPT at the end of
// KUBE-SERVICES does (kubernetes PR #62718). The neighbour still serves
// the node's own address. The host kernel has no IPVS: the node's
// listeners on the virtual addresses stand in for virtual servers.
func TestNATNeighboursDoNotTakeServiceTraffic(t *testing.T) {
	for _, nb := range natNeighbours() {
		t.Run(nb.name, func(t *testing.T) {
			testutil.RequireProgram(t, nb.program)
			node, client, pod := neighbourNode(t)
			for _, cmd := range nb.cmds {
				node.Run(t, cmd[0], cmd[1:]...)
			}
			const wait = 2 * time.Second
			for _, p := range []struct {
				name string
				from *testutil.NetNS
				to   string
				want string
			}{
				{"cluster IP from outside", client, "10.96.0.1:443", "cluster-ip "},
				{"cluster IP from the node", node, "10.96.0.1:443", "cluster-ip "},
				{"cluster IP from a pod", pod, "10.96.0.1:443", "cluster-ip "},
				{"load-balancer IP", client, "203.0.113.10:443", "lb "},
				{"external IP", client, "198.51.100.50:443", "external "},
				{"the host port on the node's address", client, "192.0.2.1:443", "pod "},
				{"IPv6 cluster IP from outside", client, "[fd00:96::1]:443", "cluster-ip "},
				{"IPv6 cluster IP from the node", node, "[fd00:96::1]:443", "cluster-ip "},
				{"IPv6 cluster IP from a pod", pod, "[fd00:96::1]:443", "cluster-ip "},
				{"the host port on the node's IPv6 address", client, "[fd00:c::1]:443", "pod "},
			} {
				reply, err := p.from.DialTCP("", p.to, wait)
				if err != nil || !strings.HasPrefix(reply, p.want) {
					t.Errorf("%s (%s): got %q, %v; want %q...", p.name, p.to, reply, err, p.want)
				}
			}
		})
	}
}

// neighbourNode is a node with a client outside, a pod behind it, three
// virtual addresses with listeners standing in for their virtual servers,
// their set entries and ipvsplane's rules.
func neighbourNode(t *testing.T) (node, client, pod *testutil.NetNS) {
	testutil.RequireProgram(t, "ipset")
	node, client, pod = testutil.NewNetNS(t), testutil.NewNetNS(t), testutil.NewNetNS(t)
	node.Link(t, "n-c", client, "c0", "192.0.2.1/24", "192.0.2.2/24")
	node.Link(t, "n-p", pod, "p0", "10.244.0.1/24", "10.244.0.5/24")
	node.IP(t, "-6", "addr", "add", "fd00:c::1/64", "dev", "n-c", "nodad")
	client.IP(t, "-6", "addr", "add", "fd00:c::2/64", "dev", "c0", "nodad")
	client.IP(t, "-6", "route", "add", "default", "via", "fd00:c::1")
	node.IP(t, "-6", "addr", "add", "fd00:244::1/64", "dev", "n-p", "nodad")
	pod.IP(t, "-6", "addr", "add", "fd00:244::5/64", "dev", "p0", "nodad")
	pod.IP(t, "-6", "route", "add", "default", "via", "fd00:244::1")
	for _, vip := range []string{"10.96.0.1/32", "203.0.113.10/32", "198.51.100.50/32", "fd00:96::1/128"} {
		node.IP(t, "addr", "add", vip, "dev", "lo")
	}
	waitLocal(t, node, "10.96.0.1", "203.0.113.10", "198.51.100.50", "fd00:96::1")
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := node.Do(func() error { return os.WriteFile(f, []byte("1"), 0o644) }); err != nil {
			t.Fatal(err)
		}
	}
	writeRulesInNetNS(t, node, [][2]string{
		{model.SetClusterIP, "10.96.0.1,tcp:443"},
		{model.SetLoadBalancer, "203.0.113.10,tcp:443"},
		{model.SetExternalIP, "198.51.100.50,tcp:443"},
		{model.SetIPVSAddresses, "10.96.0.1"},
		{model.SetIPVSAddresses, "203.0.113.10"},
		{model.SetIPVSAddresses, "198.51.100.50"},
		{model.SetName(model.SetClusterIP, inet.IPv6), "fd00:96::1,tcp:443"},
		{model.SetName(model.SetIPVSAddresses, inet.IPv6), "fd00:96::1"},
	})
	node.ServeTCP(t, "10.96.0.1:443", "cluster-ip")
	node.ServeTCP(t, "203.0.113.10:443", "lb")
	node.ServeTCP(t, "198.51.100.50:443", "external")
	node.ServeTCP(t, "[fd00:96::1]:443", "cluster-ip")
	pod.ServeTCP(t, hostPortTo, "pod")
	pod.ServeTCP(t, hostPortTo6, "pod")
	return node, client, pod
}

// kubeProxyDNAT is kube-proxy's iptables or nftables mode serving the
// cluster IPs 10.96.0.1 and fd00:96::1 (bound on the node, ipvsplane's by
// now) and 10.96.0.2 and fd00:96::2 (not bound yet) on 443 from the pod.
func kubeProxyDNAT() []natNeighbour {
	iptables := func(iptables, to string, vips ...string) [][]string {
		cmds := [][]string{
			{iptables, "-t", "nat", "-N", "KUBE-SERVICES"},
			{iptables, "-t", "nat", "-A", "PREROUTING", "-j", "KUBE-SERVICES"},
			{iptables, "-t", "nat", "-A", "OUTPUT", "-j", "KUBE-SERVICES"},
		}
		for _, vip := range vips {
			cmds = append(cmds, []string{iptables, "-t", "nat", "-A", "KUBE-SERVICES", "-d", vip, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", to})
		}
		return cmds
	}
	table := func(family, to string, vips ...string) [][]string {
		cmds := [][]string{
			{"nft", "add table " + family + " kube-proxy"},
			{"nft", "add chain " + family + " kube-proxy nat-prerouting { type nat hook prerouting priority -100; }"},
			{"nft", "add chain " + family + " kube-proxy nat-output { type nat hook output priority -100; }"},
		}
		for _, vip := range vips {
			for _, chain := range []string{"nat-prerouting", "nat-output"} {
				cmds = append(cmds, []string{"nft", "add rule " + family + " kube-proxy " + chain + " " + family + " daddr " + vip + " tcp dport 443 dnat to " + to})
			}
		}
		return cmds
	}
	return []natNeighbour{
		{"iptables mode on iptables-nft", "iptables-nft", slices.Concat(
			iptables("iptables-nft", hostPortTo, "10.96.0.1", "10.96.0.2"), iptables("ip6tables-nft", hostPortTo6, "fd00:96::1", "fd00:96::2"))},
		{"iptables mode on iptables-legacy", "iptables-legacy", slices.Concat(
			iptables("iptables-legacy", hostPortTo, "10.96.0.1", "10.96.0.2"), iptables("ip6tables-legacy", hostPortTo6, "fd00:96::1", "fd00:96::2"))},
		{"nftables mode", "nft", slices.Concat(
			table("ip", hostPortTo, "10.96.0.1", "10.96.0.2"), table("ip6", hostPortTo6, "fd00:96::1", "fd00:96::2"))},
	}
}

// During a takeover ipvsplane's sets may hold a cluster IP before the
// address is bound on the node. kube-proxy's DNAT in the older mode keeps
// serving it until then, and ipvsplane takes it once bound; a bound one is
// ipvsplane's at once. The node's listeners stand in for virtual servers.
func TestKubeProxyDNATServesUntilTheAddressIsBound(t *testing.T) {
	for _, kp := range kubeProxyDNAT() {
		t.Run(kp.name, func(t *testing.T) {
			testutil.RequireProgram(t, kp.program)
			node, client, _ := neighbourNode(t)
			// The node's default route, which an unbound cluster IP takes.
			node.IP(t, "route", "add", "default", "via", "192.0.2.2")
			node.IP(t, "-6", "route", "add", "default", "via", "fd00:c::2")
			node.Run(t, "ipset", "add", model.SetClusterIP, "10.96.0.2,tcp:443")
			node.Run(t, "ipset", "add", model.SetName(model.SetClusterIP, inet.IPv6), "fd00:96::2,tcp:443")
			for _, cmd := range kp.cmds {
				node.Run(t, cmd[0], cmd[1:]...)
			}
			expect := func(when string, want map[string]string) {
				t.Helper()
				for from, ns := range map[string]*testutil.NetNS{"the client": client, "the node": node} {
					for to, prefix := range want {
						reply, err := ns.DialTCP("", to, 2*time.Second)
						if err != nil || !strings.HasPrefix(reply, prefix) {
							t.Errorf("%s, %s from %s: got %q, %v; want %q...", when, to, from, reply, err, prefix)
						}
					}
				}
			}
			expect("before the bind", map[string]string{
				"10.96.0.1:443": "cluster-ip ", "[fd00:96::1]:443": "cluster-ip ",
				"10.96.0.2:443": "pod ", "[fd00:96::2]:443": "pod ",
			})
			node.IP(t, "addr", "add", "10.96.0.2/32", "dev", "lo")
			node.IP(t, "-6", "addr", "add", "fd00:96::2/128", "dev", "lo", "nodad")
			waitLocal(t, node, "10.96.0.2", "fd00:96::2")
			node.ServeTCP(t, "10.96.0.2:443", "cluster-ip")
			node.ServeTCP(t, "[fd00:96::2]:443", "cluster-ip")
			expect("after the bind", map[string]string{"10.96.0.2:443": "cluster-ip ", "[fd00:96::2]:443": "cluster-ip "})
		})
	}
}

// waitLocal waits until the node routes each address as its own. The
// kernel adds an IPv6 address's local route from a work queue after the
// address itself, so fib daddr type local can miss it for a moment.
func waitLocal(t *testing.T, node *testutil.NetNS, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, err := node.Output(context.Background(), "ip", "route", "get", addr)
			if err == nil && strings.HasPrefix(out, "local ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not routed as local: %q, %v", addr, out, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
