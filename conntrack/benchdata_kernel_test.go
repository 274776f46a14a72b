//go:build hosttest || vmtest

package conntrack

import (
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// benchFlows makes n UDP entries spread evenly over dests destinations
// (testutil.SpreadService), each from a distinct client address and port.
func benchFlows(n, dests int) []Flow {
	return testutil.Spread(n, dests, func(client netip.AddrPort, dst netip.Addr) Flow {
		return Flow{Orig: Tuple{Src: client.Addr(), Dst: dst, Protocol: inet.UDP, SrcPort: client.Port(), DstPort: 53}, Timeout: 10 * time.Minute}
	})
}
