package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Programs a virtual server with two real servers in one batch and lists
// the table. It needs CAP_NET_ADMIN and a kernel with IPVS.
func Example() {
	ctx := context.Background()
	conn, err := ipvs.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	svc := ipvs.Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Scheduler: "rr"}
	var b ipvs.Batch
	b.CreateService(svc)
	for _, backend := range []string{"10.244.0.5:8080", "10.244.0.6:8080"} {
		ap := netip.MustParseAddrPort(backend)
		b.CreateDestination(svc, ipvs.Destination{Addr: ap.Addr(), Port: ap.Port(), Forward: ipvs.Masquerade, Weight: 1})
	}
	if err := conn.Apply(ctx, &b); err != nil {
		log.Fatal(err)
	}

	table, err := conn.Table(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range table {
		fmt.Println(v.Service, v.Service.Scheduler, v.Destinations)
	}
}

// Apply reports every failed operation of a batch; the others are applied.
func ExampleConn_Apply() {
	ctx := context.Background()
	conn, err := ipvs.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	var b ipvs.Batch
	b.DeleteService(ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.53"), Port: 53})
	b.CreateService(ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.53"), Port: 53, Scheduler: "sh"})
	err = conn.Apply(ctx, &b)
	var be *ipvs.BatchError
	if errors.As(err, &be) {
		for _, f := range be.Failed {
			if errors.Is(f, ipvs.ErrServiceNotExist) {
				continue // deleting what is already gone is fine
			}
			log.Printf("operation %d: %v", f.Index, f)
		}
	}
}
