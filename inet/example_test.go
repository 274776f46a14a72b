package inet_test

import (
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/inet"
)

func Example() {
	p, err := inet.ParseProtocol("UDP") // as Kubernetes spells it
	if err != nil {
		panic(err)
	}
	addr := netip.MustParseAddr("fd00::10")
	fmt.Println(p, uint8(p), inet.FamilyOf(addr), inet.FamilyOf(addr).Bits())

	// A dual-stack count, one per family.
	var seen inet.PerFamily[int]
	for _, a := range []string{"10.0.0.1", "fd00::10", "10.0.0.2"} {
		*seen.Of(inet.FamilyOf(netip.MustParseAddr(a)))++
	}
	for _, f := range inet.Families() {
		fmt.Println(f, seen.Get(f))
	}
	// Output:
	// udp 17 IPv6 128
	// IPv4 2
	// IPv6 1
}
