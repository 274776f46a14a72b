// Package seam lets ipset/ipsettest build a real *ipset.Conn over a fake
// kernel, so that package ipset exports no test hook. Being internal to
// ipset, it is out of importers' reach.
package seam

import "github.com/ipvsplane/ipvsplane/internal/nl"

// NewConn returns an *ipset.Conn (as any: this package cannot name the
// type without an import cycle) over t, with socket buffers of the given
// sizes, once it has agreed on a protocol version over t. Package ipset
// sets it once, when it is initialized; nothing else writes it.
var NewConn func(t nl.Transport, readBuf, writeBuf int) (any, error)
