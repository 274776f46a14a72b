package ipvstest_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
)

// publish is the importer's code under test: it programs a virtual
// server with its backends.
func publish(ctx context.Context, c *ipvs.Conn, vip netip.AddrPort, backends ...netip.AddrPort) error {
	svc := ipvs.Service{Protocol: inet.TCP, Addr: vip.Addr(), Port: vip.Port(), Scheduler: ipvs.RoundRobin}
	var b ipvs.Batch
	b.CreateService(svc)
	for _, be := range backends {
		b.CreateDestination(svc, ipvs.Destination{Addr: be.Addr(), Port: be.Port(), Forward: ipvs.Masquerade})
	}
	return c.Apply(ctx, &b)
}

// A test of publish runs it on a fake kernel and checks the table the
// kernel ends up with; publishing again fails as on a host.
func Example() {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()

	vip := netip.MustParseAddrPort("10.96.0.10:80")
	err := publish(ctx, c, vip, netip.MustParseAddrPort("10.244.0.5:8080"), netip.MustParseAddrPort("10.244.0.6:8080"))
	fmt.Println(err)
	fmt.Print(k.Dump())

	err = publish(ctx, c, vip)
	fmt.Println(err)
	// Output:
	// <nil>
	// TCP 10.96.0.10:80 rr
	//   -> 10.244.0.5:8080 masq 1
	//   -> 10.244.0.6:8080 masq 1
	// ipvs: 1 of 1 operations failed: create service TCP 10.96.0.10:80: service already exists (file exists)
}
