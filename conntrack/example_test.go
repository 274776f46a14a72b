package conntrack_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Removes the UDP entries of a service IP that went away. It needs
// CAP_NET_ADMIN.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := conntrack.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	f := conntrack.ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 0)
	n, err := conn.DeleteMatching(ctx, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", n)
}

// After a sync, removes the entries of a UDP service that still point at
// endpoints it no longer has.
func ExampleByStaleEndpoints() {
	ctx := context.Background()
	conn, err := conntrack.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	service := netip.MustParseAddrPort("10.96.0.10:53")
	endpoints := []netip.AddrPort{
		netip.MustParseAddrPort("10.244.1.5:5353"),
		netip.MustParseAddrPort("10.244.2.7:5353"),
	}
	f := conntrack.ByStaleEndpoints(inet.UDP, service, endpoints)
	if _, err := conn.DeleteMatching(ctx, f); err != nil {
		log.Fatal(err)
	}
}

// A filter can be tried on entries without a kernel.
func ExampleFilter_Match() {
	f := conntrack.ByEndpoint(inet.UDP,
		netip.MustParseAddrPort("10.96.0.10:53"), netip.MustParseAddrPort("10.244.1.5:0"))
	flow := conntrack.Flow{
		Orig: conntrack.Tuple{
			Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.96.0.10"),
			Protocol: inet.UDP, SrcPort: 40000, DstPort: 53,
		},
		Reply: conntrack.Tuple{
			Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddr("10.0.0.2"),
			Protocol: inet.UDP, SrcPort: 5353, DstPort: 40000,
		},
	}
	fmt.Println(f.Match(&flow))
	// Output: true
}
