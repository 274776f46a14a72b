// Command conntrack deletes the UDP conntrack entries to an address, or to
// an address and port, and prints how many it deleted: what a load balancer
// does when a UDP service goes away. It needs CAP_NET_ADMIN.
//
//	conntrack 10.96.0.10
//	conntrack 10.96.0.10:53
//	conntrack [fd00:96::10]:53
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s IP[:PORT]\n", os.Args[0])
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	n, err := run(flag.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("deleted %d UDP entries to %s\n", n, flag.Arg(0))
}

// run deletes the UDP entries to dest, an address or an address and port,
// in the namespace cfg names (nil: the current one).
func run(dest string, cfg *conntrack.Config) (int, error) {
	addr, port, err := parseDest(dest)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := conntrack.Dial(cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	f := conntrack.ByDestination(inet.UDP, addr, port)
	return conn.DeleteMatching(ctx, f)
}

func parseDest(s string) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Port(), nil
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination %q: want IP or IP:PORT", s)
	}
	return addr.Unmap(), 0, nil
}
