package main

import (
	"context"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/linkaddr"
)

// interfaceAddrs returns the addresses of the node's interfaces that can
// serve node ports, as kube-proxy's IPVS mode uses them: those of every
// interface but the dummy device, which holds the service IPs, that
// nodeAddr accepts. The loopback interface counts: an anycast address on
// lo serves node ports too. The daemon reads them every sync period.
func interfaceAddrs(ctx context.Context, device string) ([]netip.Addr, error) {
	c, err := linkaddr.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	addrs, err := c.Addresses(ctx, device)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if nodeAddr(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// nodeAddr reports whether a node address can serve node ports: kube-proxy
// leaves out loopback addresses (127/8, ::1) and IPv6 link-local ones, and
// keeps the rest, IPv4 link-local included.
func nodeAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast())
}
