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

// Binds a service address as a local route rather than an address of the
// device, and lists the bindings: `ip -4 route show table local proto 201`
// shows it, `ip addr show kube-ipvs0` does not.
func Example_localRoutes() {
	ctx := context.Background()
	conn, err := dummy.Dial(&dummy.Config{Binding: dummy.BindLocalRoutes})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	dev, err := conn.Ensure(ctx, "kube-ipvs0")
	if err != nil {
		log.Fatal(err)
	}
	if err := dev.BindAll(ctx, []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11")}); err != nil {
		log.Fatal(err)
	}
	addrs, err := dev.Addresses(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(addrs)
}
