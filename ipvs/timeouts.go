package ipvs

import (
	"fmt"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"math"
	"time"
)

// Timeouts are the kernel's connection timeouts for IPVS connections, per
// network namespace, in whole seconds.
type Timeouts struct {
	TCP    time.Duration // established TCP connections
	TCPFin time.Duration // TCP connections after a FIN
	UDP    time.Duration
}

func (t Timeouts) validate() error {
	for _, d := range []time.Duration{t.TCP, t.TCPFin, t.UDP} {
		if d < 0 || d%time.Second != 0 || d/time.Second > math.MaxInt32 {
			return fmt.Errorf("timeout %v is not a whole number of seconds in range", d)
		}
	}
	return nil
}

// encode writes the three first-level timeout attributes. The kernel
// leaves a timeout of zero unchanged.
func (t Timeouts) encode(w *nl.Writer) {
	w.Uint32(cmdAttrTimeoutTCP, uint32(t.TCP/time.Second))
	w.Uint32(cmdAttrTimeoutTCPFin, uint32(t.TCPFin/time.Second))
	w.Uint32(cmdAttrTimeoutUDP, uint32(t.UDP/time.Second))
}

// decodeTimeouts reads the reply to IPVS_CMD_GET_CONFIG.
func decodeTimeouts(b []byte) (Timeouts, error) {
	d := nl.NewReader(b, "timeouts")
	var t Timeouts
	for d.Next() {
		switch d.Type() {
		case cmdAttrTimeoutTCP:
			t.TCP = time.Duration(d.Uint32()) * time.Second
		case cmdAttrTimeoutTCPFin:
			t.TCPFin = time.Duration(d.Uint32()) * time.Second
		case cmdAttrTimeoutUDP:
			t.UDP = time.Duration(d.Uint32()) * time.Second
		}
	}
	return t, d.Err()
}
