package conntracktest_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/conntracktest"
	"github.com/ipvsplane/ipvsplane/inet"
)

// forget is the importer's code under test: when a UDP service's endpoint
// goes away, it removes the entries that still lead there.
func forget(ctx context.Context, c *conntrack.Conn, service, endpoint netip.AddrPort) (int, error) {
	return c.DeleteMatching(ctx, conntrack.ByEndpoint(inet.UDP, service, endpoint))
}

// A test of forget seeds the fake table with the entries traffic would
// have made and checks what is left.
func Example() {
	ctx := context.Background()
	k := conntracktest.New(nil)
	dns := netip.MustParseAddr("10.96.0.10")
	client := netip.MustParseAddr("10.0.0.2")
	udp := func(sport uint16, backend string) conntrack.Flow {
		return conntrack.Flow{
			Orig:  conntrack.Tuple{Protocol: inet.UDP, Src: client, SrcPort: sport, Dst: dns, DstPort: 53},
			Reply: conntrack.Tuple{Protocol: inet.UDP, Src: netip.MustParseAddr(backend), SrcPort: 5353, Dst: client, DstPort: sport},
		}
	}
	if err := k.Add(udp(40000, "10.244.1.5"), udp(40001, "10.244.2.7")); err != nil {
		fmt.Println(err)
		return
	}
	c := k.Dial()
	defer c.Close()

	n, err := forget(ctx, c, netip.AddrPortFrom(dns, 53), netip.MustParseAddrPort("10.244.1.5:5353"))
	fmt.Println(n, err)
	fmt.Print(k.Dump())
	// Output:
	// 1 <nil>
	// udp 10.0.0.2:40001->10.96.0.10:53 reply 10.244.2.7:5353->10.0.0.2:40001 status 0x8
}
