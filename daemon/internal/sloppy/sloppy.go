// Package sloppy parses addresses and CIDRs as kube-proxy does, with
// k8s.io/utils/net's ParseIPSloppy and ParseCIDRSloppy: an IPv4 part with
// leading zeros is read as decimal ("010.0.0.1" is 10.0.0.1), as Go read
// it before 1.17 and as the API server still accepts it in fields that
// always did. The configuration and the watcher read the same way.
package sloppy

import (
	"net/netip"

	netutils "k8s.io/utils/net"
)

// ParseAddr parses an address. An IPv4-mapped IPv6 address is its IPv4
// address; a zone is refused.
func ParseAddr(s string) (netip.Addr, bool) {
	ip, ok := netip.AddrFromSlice(netutils.ParseIPSloppy(s))
	return ip.Unmap(), ok
}

// ParsePrefix parses a CIDR and returns it masked.
func ParsePrefix(s string) (netip.Prefix, bool) {
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	bits, _ := n.Mask.Size()
	if !ok {
		return netip.Prefix{}, false
	}
	if ip.Is4In6() && bits >= 96 {
		ip, bits = ip.Unmap(), bits-96
	}
	p := netip.PrefixFrom(ip, bits)
	return p.Masked(), p.IsValid()
}
