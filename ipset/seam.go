package ipset

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset/internal/seam"
)

// The seam through which ipset/ipsettest gets a real Conn on its fake
// kernel.
func init() {
	seam.NewConn = func(t nl.Transport, readBuf, writeBuf int) (any, error) {
		return newConn(nl.NewConn(t, readBuf, writeBuf))
	}
}
