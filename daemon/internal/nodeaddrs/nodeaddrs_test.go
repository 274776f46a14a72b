package nodeaddrs

import (
	"net/netip"
	"testing"
)

// Node ports are served on every node address kube-proxy's IPVS mode
// keeps: all but loopback and IPv6 link-local ones.
func TestNodeAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"192.168.0.10":   true,
		"169.254.10.1":   true, // IPv4 link-local: kube-proxy keeps it
		"203.0.113.9":    true, // e.g. an anycast address on lo
		"2001:db8::1":    true,
		"127.0.0.1":      false,
		"127.0.1.1":      false,
		"::1":            false,
		"fe80::1":        false,
		"0.0.0.0":        false,
		"::ffff:1.2.3.4": true,
	} {
		if got := servesNodePorts(netip.MustParseAddr(addr)); got != want {
			t.Errorf("servesNodePorts(%s) = %v, want %v", addr, got, want)
		}
	}
}
