package ipvs

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipvs/internal/seam"
)

// The seam through which ipvs/ipvstest gets a real Conn on its fake kernel.
func init() {
	seam.NewConn = func(t nl.Transport, family uint16, readBuf, writeBuf int) any {
		return newConn(nl.NewConn(t, readBuf, writeBuf), family)
	}
}
