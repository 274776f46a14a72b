// Package seam lets conntrack/conntracktest build a real *conntrack.Conn
// over a fake kernel, so that package conntrack exports no test hook.
// Being internal to conntrack, it is out of importers' reach.
package seam

import "github.com/ipvsplane/ipvsplane/internal/nl"

// NewConn returns a *conntrack.Conn (as any: this package cannot name the
// type without an import cycle) over t, with socket buffers of the given
// sizes. Package conntrack sets it once, when it is initialized; nothing
// else writes it.
var NewConn func(t nl.Transport, readBuf, writeBuf int) any
