// Command dummy makes sure a dummy device exists (kube-ipvs0 by default),
// binds the addresses given on the command line to it and lists what the
// device holds afterwards. It needs CAP_NET_ADMIN and a kernel with the
// dummy driver.
//
//	dummy 10.96.0.10 fd00:96::10
//	dummy -device lb0 -unbind 10.96.0.10
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/ipvsplane/ipvsplane/dummy"
)

func main() {
	name := flag.String("device", "kube-ipvs0", "name of the dummy device")
	unbind := flag.Bool("unbind", false, "unbind the addresses instead of binding them")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-device NAME] [-unbind] ADDRESS...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*name, *unbind, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(name string, unbind bool, args []string) error {
	addrs := make([]netip.Addr, 0, len(args))
	for _, arg := range args {
		addr, err := netip.ParseAddr(arg)
		if err != nil {
			return fmt.Errorf("address %q: %w", arg, err)
		}
		addrs = append(addrs, addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := dummy.Dial(nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	dev, err := conn.Ensure(ctx, name)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if unbind {
			err = dev.Unbind(ctx, addr)
		} else {
			err = dev.Bind(ctx, addr)
		}
		if err != nil {
			return err
		}
	}
	bound, err := dev.Addresses(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d addresses\n", name, len(bound))
	for _, addr := range bound {
		fmt.Println(addr)
	}
	return nil
}
