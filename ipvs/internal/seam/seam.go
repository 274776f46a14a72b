// Package seam lets ipvs/ipvstest build a real *ipvs.Conn over a fake
// kernel, so that package ipvs exports no test hook. Being internal to
// ipvs, it is out of importers' reach.
package seam

import "github.com/ipvsplane/ipvsplane/internal/nl"

// NewConn returns an *ipvs.Conn (as any: this package cannot name the
// type without an import cycle) that speaks to the IPVS family with the
// given id over t, with socket buffers of the given sizes. Package ipvs
// sets it once, when it is initialized; nothing else writes it.
var NewConn func(t nl.Transport, family uint16, readBuf, writeBuf int) any
