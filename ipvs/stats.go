package ipvs

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Stats are the counters of a service or destination. The kernel keeps
// them 64 bits wide; kernels before 4.1 report only 32-bit packet and
// connection counters.
type Stats struct {
	Connections uint64 // connections scheduled
	PacketsIn   uint64
	PacketsOut  uint64
	BytesIn     uint64
	BytesOut    uint64

	// Rates, estimated by the kernel every two seconds.
	CPS          uint64 // connections per second
	PacketsInPS  uint64
	PacketsOutPS uint64
	BytesInPS    uint64
	BytesOutPS   uint64
}

// decodeStats reads a STATS or STATS64 nest.
func decodeStats(b []byte) (Stats, error) {
	d := nl.NewReader(b, "stats")
	var s Stats
	for d.Next() {
		var dst *uint64
		switch d.Type() {
		case statsAttrConns:
			dst = &s.Connections
		case statsAttrInPkts:
			dst = &s.PacketsIn
		case statsAttrOutPkts:
			dst = &s.PacketsOut
		case statsAttrInBytes:
			dst = &s.BytesIn
		case statsAttrOutBytes:
			dst = &s.BytesOut
		case statsAttrCPS:
			dst = &s.CPS
		case statsAttrInPPS:
			dst = &s.PacketsInPS
		case statsAttrOutPPS:
			dst = &s.PacketsOutPS
		case statsAttrInBPS:
			dst = &s.BytesInPS
		case statsAttrOutBPS:
			dst = &s.BytesOutPS
		default:
			continue
		}
		*dst = counter(&d)
	}
	return s, d.Err()
}
