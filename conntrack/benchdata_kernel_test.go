//go:build hosttest || vmtest

package conntrack

import (
	"net/netip"
	"time"
)

// benchDestination is the i-th of the service addresses the large tables
// spread their entries over.
func benchDestination(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)})
}

// benchFlows makes n UDP entries spread evenly over dests destinations,
// each from a distinct client address and port.
func benchFlows(n, dests int) []Flow {
	flows := make([]Flow, n)
	for i := range flows {
		client := netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)})
		flows[i] = Flow{
			Orig: Tuple{
				Src: client, Dst: benchDestination(i % dests),
				Protocol: UDP, SrcPort: uint16(1024 + i&0xff), DstPort: 53,
			},
			Timeout: 10 * time.Minute,
		}
	}
	return flows
}
