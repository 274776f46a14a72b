// Package nodeaddrs lists the node's addresses that serve node ports, as
// kube-proxy's IPVS mode chooses them, and follows them while the daemon
// runs.
package nodeaddrs

import (
	"context"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/linkaddr"
)

// Read returns the addresses of the node's interfaces that can serve node
// ports, as kube-proxy's IPVS mode uses them: those of every interface but
// the dummy device, which holds the service IPs, that servesNodePorts
// accepts. The loopback interface counts: an anycast address on
// lo serves node ports too. The daemon reads them every sync period.
func Read(ctx context.Context, device string) ([]netip.Addr, error) {
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
		if servesNodePorts(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// servesNodePorts reports whether a node address can serve node ports: kube-proxy
// leaves out loopback addresses (127/8, ::1) and IPv6 link-local ones, and
// keeps the rest, IPv4 link-local included.
func servesNodePorts(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast())
}
