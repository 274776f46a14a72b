package nl

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/uapi"
)

// Headers of rtnetlink's link and address messages: struct ifinfomsg
// (include/uapi/linux/rtnetlink.h) and struct ifaddrmsg (if_addr.h).
const (
	IfInfoMsgLen = 16
	IfAddrMsgLen = 8
)

// DecodeIfInfo reads an RTM_NEWLINK message: its link's index, name
// (IFLA_IFNAME) and kind (IFLA_INFO_KIND in IFLA_LINKINFO; "" for a
// physical device).
func DecodeIfInfo(b []byte) (index int32, name, kind string, err error) {
	if len(b) < IfInfoMsgLen {
		return 0, "", "", fmt.Errorf("link message of %d bytes", len(b))
	}
	index = int32(binary.NativeEndian.Uint32(b[4:8]))
	d := NewReader(b[IfInfoMsgLen:], "link")
	for d.Next() {
		switch d.Type() {
		case uapi.IFLA_IFNAME:
			name = d.String(0)
		case uapi.IFLA_LINKINFO:
			d.Nest(func(info *Reader) {
				for info.Next() {
					if info.Type() == uapi.IFLA_INFO_KIND {
						kind = info.String(0)
					}
				}
			})
		}
	}
	return index, name, kind, d.Err()
}

// DecodeIfAddr reads an RTM_NEWADDR message: its link's index and its
// address, invalid when it carries none. IFA_LOCAL is the address itself;
// IFA_ADDRESS is the peer's on an IPv4 point-to-point link, and the only
// one IPv6 sends.
func DecodeIfAddr(b []byte) (index int32, addr netip.Addr, err error) {
	if len(b) < IfAddrMsgLen {
		return 0, addr, fmt.Errorf("address message of %d bytes", len(b))
	}
	index = int32(binary.NativeEndian.Uint32(b[4:8]))
	var local, address netip.Addr
	d := NewReader(b[IfAddrMsgLen:], "address")
	for d.Next() {
		switch d.Type() {
		case uapi.IFA_LOCAL:
			local = d.Addr()
		case uapi.IFA_ADDRESS:
			address = d.Addr()
		}
	}
	if err := d.Err(); err != nil {
		return index, netip.Addr{}, err
	}
	if local.IsValid() {
		return index, local, nil
	}
	return index, address, nil
}
