package dummy_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/dummy"
)

// Binds a service address to kube-ipvs0 and lists what is bound. It needs
// CAP_NET_ADMIN and a kernel with the dummy driver.
func Example() {
	ctx := context.Background()
	conn, err := dummy.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	dev, err := conn.Ensure(ctx, "kube-ipvs0")
	if err != nil {
		log.Fatal(err)
	}
	if err := dev.Bind(ctx, netip.MustParseAddr("10.96.0.10")); err != nil {
		log.Fatal(err)
	}
	addrs, err := dev.Addresses(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(addrs)
}
