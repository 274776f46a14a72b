// Package seam lets dummy/dummytest build a real *dummy.Conn over a fake
// kernel, so that package dummy exports no test hook. Being internal to
// dummy, it is out of importers' reach.
package seam

import "github.com/ipvsplane/ipvsplane/internal/nl"

// NewConn returns a *dummy.Conn (as any: this package cannot name the
// type without an import cycle) over t, with socket buffers of the given
// sizes, binding addresses as binding (a dummy.Binding) says. Package
// dummy sets it once, when it is initialized; nothing else writes it.
var NewConn func(t nl.Transport, readBuf, writeBuf int, binding uint8) any
