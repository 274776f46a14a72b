package nl

import (
	"context"
	"fmt"

	"github.com/mdlayher/netlink"
)

// Generic netlink, from include/uapi/linux/genetlink.h.
const (
	GenlHeaderLen      = 4
	genlIDCtrl         = 0x10 // GENL_ID_CTRL
	ctrlCmdGetFamily   = 3    // CTRL_CMD_GETFAMILY
	ctrlAttrFamilyID   = 1    // CTRL_ATTR_FAMILY_ID
	ctrlAttrFamilyName = 2    // CTRL_ATTR_FAMILY_NAME
)

// AppendGenlHeader appends struct genlmsghdr.
func AppendGenlHeader(b []byte, cmd, version uint8) []byte {
	return append(b, cmd, version, 0, 0)
}

// GenlFamily looks up a generic netlink family's id by name. A kernel
// without the family answers ENOENT, in an *Error.
func (c *Conn) GenlFamily(ctx context.Context, name string) (uint16, error) {
	w := Writer{B: AppendGenlHeader(nil, ctrlCmdGetFamily, 1)}
	w.String(ctrlAttrFamilyName, name)
	r := &Request{Type: genlIDCtrl, Flags: netlink.Acknowledge, Data: w.B}
	if err := c.Exchange(ctx, r); err != nil {
		return 0, err
	}
	if r.Err != nil {
		return 0, r.Err
	}
	for _, m := range r.Replies {
		if len(m.Data) < GenlHeaderLen {
			continue
		}
		d := NewReader(m.Data[GenlHeaderLen:], "generic netlink family")
		for d.Next() {
			if d.Type() == ctrlAttrFamilyID {
				id := d.Uint16()
				return id, d.Err()
			}
		}
		if err := d.Err(); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("generic netlink family %q: reply without its id", name)
}
