package dummy

import (
	"github.com/ipvsplane/ipvsplane/dummy/internal/seam"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// The seam through which dummy/dummytest gets a real Conn on its fake
// kernel.
func init() {
	seam.NewConn = func(t nl.Transport, readBuf, writeBuf int, binding uint8) any {
		c := newConn(nl.NewConn(t, readBuf, writeBuf))
		c.binding = Binding(binding)
		return c
	}
}
