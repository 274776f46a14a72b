//go:build hosttest

package conntrack

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// secondNodeAddr is another local address of the node, for node ports.
var secondNodeAddr = map[bool]netip.Addr{
	false: netip.MustParseAddr("192.168.0.1"),
	true:  netip.MustParseAddr("fd00:168::1"),
}

// natRules DNATs the services and node ports to the endpoints, which are
// local addresses of the node, choosing the endpoint by client port so the
// test knows which reply source each entry gets, as IPVS would give.
const natRules = `
table inet ipvsplane_test {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 udp dport 53 udp sport 20000-20004 dnat ip to 10.244.0.1:5353
		ip daddr 10.96.0.10 udp dport 53 udp sport 20005-20008 dnat ip to 10.244.0.2:5353
		ip daddr 10.96.0.10 udp dport 80 dnat ip to 10.244.0.1:8080
		ip daddr 10.96.0.11 udp dport 53 dnat ip to 10.244.0.1:5353
		meta nfproto ipv4 udp dport 30053 dnat ip to 10.244.0.2:5353
		ip6 daddr fd00:96::10 udp dport 53 udp sport 20000-20004 dnat ip6 to [fd00:244::1]:5353
		ip6 daddr fd00:96::10 udp dport 53 udp sport 20005-20008 dnat ip6 to [fd00:244::2]:5353
		ip6 daddr fd00:96::10 udp dport 80 dnat ip6 to [fd00:244::1]:8080
		ip6 daddr fd00:96::11 udp dport 53 dnat ip6 to [fd00:244::1]:5353
		meta nfproto ipv6 udp dport 30053 dnat ip6 to [fd00:244::2]:5353
	}
}
`

// trafficNode makes a node namespace whose conntrack entries come from real
// UDP packets: a client namespace on a veth sends to services and node
// ports that an nftables DNAT rule in the node sends on to endpoints.
func trafficNode(t *testing.T) (*Conn, *testutil.NetNS) {
	t.Helper()
	testutil.RequireProgram(t, "nft")
	node := testutil.NewNetNS(t)
	client := testutil.NewNetNS(t)
	node.Link(t, "v0", client, "v1", "10.0.0.1/24", "10.0.0.2/24")
	for _, args := range [][]string{
		{"-6", "addr", "add", "fd00:1::1/64", "dev", "v0", "nodad"},
		{"addr", "add", "192.168.0.1/32", "dev", "lo"},
		{"addr", "add", "10.244.0.1/32", "dev", "lo"},
		{"addr", "add", "10.244.0.2/32", "dev", "lo"},
		{"-6", "addr", "add", "fd00:168::1/128", "dev", "lo"},
		{"-6", "addr", "add", "fd00:244::1/128", "dev", "lo"},
		{"-6", "addr", "add", "fd00:244::2/128", "dev", "lo"},
	} {
		node.IP(t, args...)
	}
	for _, args := range [][]string{
		{"-6", "addr", "add", "fd00:1::2/64", "dev", "v1", "nodad"},
		{"-6", "route", "add", "default", "via", "fd00:1::1"},
	} {
		client.IP(t, args...)
	}
	rules := filepath.Join(t.TempDir(), "nat.nft")
	if err := os.WriteFile(rules, []byte(natRules), 0o644); err != nil {
		t.Fatal(err)
	}
	node.Run(t, "nft", "-f", rules)

	want := 0
	for _, ad := range []addrs{addrs4, addrs6} {
		send := func(n int, dst netip.Addr, port uint16) {
			for i := range n {
				sendUDP(t, client, netip.AddrPortFrom(ad.client, uint16(20000+i)), netip.AddrPortFrom(dst, port))
				want++
			}
		}
		send(5+4, ad.svc, 53)
		send(3, ad.svc, 80)
		send(3, ad.otherSvc, 53)
		send(3, ad.node, 30053)
		send(2, secondNodeAddr[ad.node.Is6()], 30053)
	}
	c := testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: node.FD()}) })
	// Packets cross the veth asynchronously; wait until all are tracked.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Count(testutil.Context(t), Filter{Protocol: inet.UDP})
		if err != nil {
			t.Fatal(err)
		}
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d UDP entries tracked, want %d", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, node
}

// sendUDP sends one datagram from src to dst inside ns.
func sendUDP(t *testing.T, ns *testutil.NetNS, src, dst netip.AddrPort) {
	t.Helper()
	conn, err := ns.DialUDP(src.String(), dst.String())
	if err == nil {
		_, err = conn.Write([]byte("ipvsplane"))
		conn.Close()
	}
	if err != nil {
		t.Fatalf("sending %v -> %v: %v", src, dst, err)
	}
}

func TestTrafficDeleteForms(t *testing.T) {
	eachDeleteCase(t, func(t *testing.T, family string, ad addrs, tc deleteCase) {
		c, node := trafficNode(t)
		before := conntrackList(t, node, "-p", "udp")
		// The NAT must show: reply sources are endpoints, not the
		// addresses the client sent to.
		nated := 0
		for _, e := range before {
			if e.replySrc.Addr() == ad.ep1 || e.replySrc.Addr() == ad.ep2 {
				nated++
			}
		}
		if nated != 20 {
			t.Fatalf("%d %s entries with an endpoint as reply source, want 20: %v", nated, family, before)
		}
		checkDelete(t, c, node, tc, before, func() []listed { return conntrackList(t, node, "-p", "udp") })
	})
}
