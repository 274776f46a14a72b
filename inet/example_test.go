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
	// Output: udp 17 IPv6 128
}
