package planner

import (
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// primaryIP returns the node's primary IP of a family, as kube-proxy
// takes it from the Node object, or without one the family's loopback
// address, as kube-proxy's detectNodeIPs gives a family the Node lacks.
func primaryIP(n *model.Node, f inet.Family) netip.Addr {
	for _, a := range n.NodeIPs {
		if inet.FamilyOf(a) == f {
			return a
		}
	}
	return loopback(f)
}

// localAddrs returns the node's addresses, or without them its Node
// object's.
func localAddrs(n *model.Node) []netip.Addr {
	if len(n.Addresses) == 0 {
		return n.NodeIPs
	}
	return n.Addresses
}

// nodePortPrefixes returns the prefixes that limit the node-port
// addresses: NodePortAddresses with, for NodePortPrimary, the primary IPs.
// A family the Node lists no IP of (or before the Node is read) has its
// loopback address as its primary IP, as in kube-proxy: it serves node
// ports on no node address, where no prefix at all would serve them on
// every one.
func nodePortPrefixes(n *model.Node) []netip.Prefix {
	prefixes := n.NodePortAddresses
	if n.NodePortPrimary {
		prefixes = slices.Clone(prefixes)
		for _, f := range inet.Families() {
			a := primaryIP(n, f)
			prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return prefixes
}

// nodePortIPs returns the addresses node ports are served on.
func nodePortIPs(n *model.Node) []netip.Addr {
	prefixes := nodePortPrefixes(n)
	var addrs []netip.Addr
	for _, a := range localAddrs(n) {
		if servesNodePorts(prefixes, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// HealthCheckAddresses returns the addresses a node's health-check node
// ports listen on, IPv4 first, as kube-proxy's service health servers choose
// them per family: the family's unspecified address (0.0.0.0 or ::, every
// address of the family) when its prefixes match all its addresses, else
// each of its node-port addresses and the loopback address if a prefix
// holds it. A family that matches all but has no node-port address has
// none, as it has no node port.
func HealthCheckAddresses(n *model.Node) []netip.Addr {
	prefixes := nodePortPrefixes(n)
	served := nodePortIPs(n)
	var out []netip.Addr
	for _, wildcard := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		f := inet.FamilyOf(wildcard)
		if f == inet.IPv6 && n.IPv4Only {
			break
		}
		var family []netip.Addr
		for _, a := range served {
			if inet.FamilyOf(a) == f {
				family = append(family, a)
			}
		}
		if !matchesAll(prefixes, f) {
			// Node ports leave loopback out in IPVS mode; kube-proxy's
			// health servers listen on it when a prefix holds it.
			if lo := loopback(f); servesNodePorts(prefixes, lo) {
				family = append(family, lo)
			}
			out = append(out, family...)
		} else if len(family) > 0 {
			out = append(out, wildcard)
		}
	}
	return out
}

// loopback returns the loopback address of a family.
func loopback(f inet.Family) netip.Addr {
	if f == inet.IPv6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// matchesAll reports whether prefixes leave a family's node-port
// addresses unrestricted: no prefix of the family, or one of length 0.
func matchesAll(prefixes []netip.Prefix, f inet.Family) bool {
	family := false
	for _, p := range prefixes {
		if inet.FamilyOf(p.Addr()) == f {
			family = true
			if p.Bits() == 0 {
				return true
			}
		}
	}
	return !family
}

// servesNodePorts reports whether node address a serves node ports under
// prefixes, per family as kube-proxy's NodePortAddresses: a family with no
// prefix, or with one of length 0, matches all its addresses.
func servesNodePorts(prefixes []netip.Prefix, a netip.Addr) bool {
	family := false
	for _, p := range prefixes {
		if p.Addr().Is6() != a.Is6() {
			continue
		}
		family = true
		if p.Bits() == 0 || p.Contains(a) {
			return true
		}
	}
	return !family
}
