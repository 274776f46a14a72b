package ipvs_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"syscall"

	"github.com/ipvsplane/ipvsplane/compat/moby/ipvs"
	ipvsplane "github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
)

// Code written for moby/ipvs, with only its import path changed. It needs
// CAP_NET_ADMIN and a kernel with IPVS.
func Example() {
	handle, err := ipvs.New("")
	if err != nil {
		log.Fatalf("ipvs.New: %s", err)
	}
	defer handle.Close()
	svc := &ipvs.Service{
		AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP,
		Address: net.ParseIP("10.96.0.10"), Port: 80,
		SchedName: ipvs.RoundRobin, Netmask: 0xffffffff,
	}
	if err := handle.NewService(svc); err != nil {
		log.Fatalf("handle.NewService: %s", err)
	}
	svcs, err := handle.GetServices()
	if err != nil {
		log.Fatalf("handle.GetServices: %s", err)
	}
	fmt.Println(len(svcs))
}

// Unit-tests moby-shaped code on package ipvstest's in-memory IPVS.
func ExampleFromConn() {
	handle := ipvs.FromConn(ipvstest.New(nil).Dial())
	defer handle.Close()

	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 7, SchedName: ipvs.SourceHashing}
	if err := handle.NewService(svc); err != nil {
		log.Fatal(err)
	}
	for _, ip := range []string{"10.244.0.5", "10.244.0.6"} {
		d := &ipvs.Destination{Address: net.ParseIP(ip), Port: 8080, Weight: 1}
		if err := handle.NewDestination(svc, d); err != nil {
			log.Fatal(err)
		}
	}
	err := handle.NewService(svc)
	fmt.Println(err, err == syscall.EEXIST)
	dests, _ := handle.GetDestinations(svc)
	fmt.Println(len(dests), "destinations")
	// Output:
	// file exists true
	// 2 destinations
}

// Handle.Conn reaches what moby/ipvs's API cannot say: a batch of
// changes sent together, and 64-bit counters.
func ExampleHandle_Conn() {
	handle, err := ipvs.New("")
	if err != nil {
		log.Fatal(err)
	}
	defer handle.Close()
	ctx := context.Background()

	svc := &ipvs.Service{
		AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_UDP,
		Address: net.ParseIP("10.96.0.53"), Port: 53, SchedName: ipvs.RoundRobin,
	}
	s, err := ipvs.ToService(svc)
	if err != nil {
		log.Fatal(err)
	}
	var b ipvsplane.Batch
	b.CreateService(s)
	for _, ip := range []string{"10.244.0.7", "10.244.0.8", "10.244.0.9"} {
		d, err := ipvs.ToDestination(&ipvs.Destination{Address: net.ParseIP(ip), Port: 53, Weight: 1})
		if err != nil {
			log.Fatal(err)
		}
		b.CreateDestination(s, d)
	}
	if err := handle.Conn().Apply(ctx, &b); err != nil {
		log.Fatal(err)
	}
	got, err := handle.Conn().GetService(ctx, s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Stats.PacketsIn) // uint64
}
