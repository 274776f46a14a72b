package ipvs

import (
	"fmt"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Info describes the kernel's IPVS.
type Info struct {
	Version Version
	// ConnTableSize is the number of buckets of the connection hash table
	// (module parameter conn_tab_bits).
	ConnTableSize uint32
}

// Version is the IPVS version, 1.2.1 on every kernel since 2.6.
type Version struct {
	Major, Minor, Patch uint8
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// decodeInfo reads the reply to IPVS_CMD_GET_INFO.
func decodeInfo(b []byte) (Info, error) {
	d := nl.NewReader(b, "info")
	var i Info
	for d.Next() {
		switch d.Type() {
		case infoAttrVersion:
			v := d.Uint32()
			i.Version = Version{Major: uint8(v >> 16), Minor: uint8(v >> 8), Patch: uint8(v)}
		case infoAttrConnTabSize:
			i.ConnTableSize = d.Uint32()
		}
	}
	return i, d.Err()
}
