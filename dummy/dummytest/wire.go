package dummytest

import (
	"encoding/binary"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
)

// Sizes of struct ifinfomsg, ifaddrmsg and rtmsg
// (include/uapi/linux/rtnetlink.h, if_addr.h).
const (
	ifinfomsgLen = 16
	ifaddrmsgLen = 8
	rtmsgLen     = 12
)

// linkRequest is what the fake reads of a link message.
type linkRequest struct {
	index int32
	name  string
	kind  string
}

func parseLink(b []byte) (linkRequest, bool) {
	var r linkRequest
	if len(b) < ifinfomsgLen {
		return r, false
	}
	r.index = int32(binary.NativeEndian.Uint32(b[4:8]))
	d := nl.NewReader(b[ifinfomsgLen:], "link")
	for d.Next() {
		switch d.Type() {
		case uapi.IFLA_IFNAME:
			r.name = d.String(uapi.IFNAMSIZ)
		case uapi.IFLA_LINKINFO:
			d.Nest(func(info *nl.Reader) {
				for info.Next() {
					if info.Type() == uapi.IFLA_INFO_KIND {
						r.kind = info.String(0)
					}
				}
			})
		}
	}
	return r, d.Err() == nil
}

// addrRequest is what the fake reads of an address message.
type addrRequest struct {
	family uint8
	index  int32
	prefix netip.Prefix
}

// parseAddr reads an address message: the address is IFA_LOCAL, else
// IFA_ADDRESS, as the kernel takes it for IPv4, and IFA_ADDRESS, else
// IFA_LOCAL, as for IPv6; a dump request has none.
func parseAddr(b []byte) (addrRequest, bool) {
	var r addrRequest
	if len(b) < ifaddrmsgLen {
		return r, false
	}
	r.family, r.index = b[0], int32(binary.NativeEndian.Uint32(b[4:8]))
	bits := int(b[1])
	var local, address netip.Addr
	d := nl.NewReader(b[ifaddrmsgLen:], "address")
	for d.Next() {
		switch d.Type() {
		case uapi.IFA_LOCAL:
			local = d.Addr()
		case uapi.IFA_ADDRESS:
			address = d.Addr()
		}
	}
	a := local
	if !a.IsValid() || (r.family == uapi.AF_INET6 && address.IsValid()) {
		a = address
	}
	if a.IsValid() {
		r.prefix = netip.PrefixFrom(a, bits)
	}
	return r, d.Err() == nil
}

// routeRequest is what the fake reads of a route message.
type routeRequest struct {
	family uint8
	route
}

func parseRoute(b []byte) (routeRequest, bool) {
	var r routeRequest
	if len(b) < rtmsgLen {
		return r, false
	}
	r.family = b[0]
	bits := int(b[1])
	r.table, r.protocol, r.scope, r.typ = uint32(b[4]), b[5], b[6], b[7]
	d := nl.NewReader(b[rtmsgLen:], "route")
	for d.Next() {
		switch d.Type() {
		case uapi.RTA_DST:
			r.dst = netip.PrefixFrom(d.Addr(), bits)
		case uapi.RTA_OIF:
			r.oif = int32(d.Uint32())
		case uapi.RTA_TABLE:
			r.table = d.Uint32()
		case uapi.RTA_PREFSRC:
			r.prefsrc = d.Addr()
		}
	}
	return r, d.Err() == nil
}

// linkMessage is the RTM_NEWLINK message by which the kernel reports a
// link: ifinfomsg, IFLA_IFNAME and, for a link of a kind, IFLA_LINKINFO
// with IFLA_INFO_KIND.
func linkMessage(l *link) []byte {
	w := nl.Writer{B: make([]byte, ifinfomsgLen)}
	typ := uint16(uapi.ARPHRD_ETHER)
	if l.kind == "" {
		typ = uapi.ARPHRD_LOOPBACK
	}
	binary.NativeEndian.PutUint16(w.B[2:], typ)
	binary.NativeEndian.PutUint32(w.B[4:], uint32(l.index))
	if l.up {
		binary.NativeEndian.PutUint32(w.B[8:], uapi.IFF_UP|uapi.IFF_RUNNING)
	}
	w.String(uapi.IFLA_IFNAME, l.name)
	if l.kind != "" {
		n := w.Begin(uapi.IFLA_LINKINFO | nl.Nested)
		w.String(uapi.IFLA_INFO_KIND, l.kind)
		w.End(n)
	}
	return w.B
}

// addrMessage is the RTM_NEWADDR message by which the kernel reports an
// address: permanent, IPv6 ones without duplicate address detection as
// package dummy binds them.
func addrMessage(l *link, p netip.Prefix) []byte {
	w := nl.Writer{B: make([]byte, ifaddrmsgLen)}
	w.B[0], w.B[1], w.B[2] = uapi.AF_INET, byte(p.Bits()), uapi.IFA_F_PERMANENT
	if p.Addr().Is6() {
		w.B[0] = uapi.AF_INET6
	}
	binary.NativeEndian.PutUint32(w.B[4:], uint32(l.index))
	w.Addr(uapi.IFA_ADDRESS, p.Addr())
	if p.Addr().Is4() {
		w.Addr(uapi.IFA_LOCAL, p.Addr())
		w.String(uapi.IFA_LABEL, l.name)
		w.Uint32(uapi.IFA_FLAGS, uapi.IFA_F_PERMANENT)
	} else {
		w.Uint32(uapi.IFA_FLAGS, uapi.IFA_F_PERMANENT|uapi.IFA_F_NODAD)
	}
	return w.B
}

// routeMessage is the RTM_NEWROUTE message by which the kernel reports a
// route.
func routeMessage(r route) []byte {
	w := nl.Writer{B: make([]byte, rtmsgLen)}
	w.B[0], w.B[1] = uapi.AF_INET, byte(r.dst.Bits())
	w.B[4], w.B[5], w.B[6], w.B[7] = byte(min(r.table, 255)), r.protocol, r.scope, r.typ
	w.Uint32(uapi.RTA_TABLE, r.table)
	w.Addr(uapi.RTA_DST, r.dst.Addr())
	if r.prefsrc.IsValid() {
		w.Addr(uapi.RTA_PREFSRC, r.prefsrc)
	}
	w.Uint32(uapi.RTA_OIF, uint32(r.oif))
	return w.B
}

// reply frames a message of the given type answering req.
func reply(req netlink.Message, typ uint16, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   data,
	}
}
