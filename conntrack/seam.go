package conntrack

import (
	"github.com/ipvsplane/ipvsplane/conntrack/internal/seam"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// The seam through which conntrack/conntracktest gets a real Conn on its
// fake kernel.
func init() {
	seam.NewConn = func(t nl.Transport, readBuf, writeBuf int) any {
		return newConn(nl.NewConn(t, readBuf, writeBuf))
	}
}
