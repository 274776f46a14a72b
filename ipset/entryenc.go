package ipset

import (
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Entries are encoded with the allocation-free nl.Writer: a bulk load
// encodes every entry of a set, and this is its hot path. The layout is
// ipset(8)'s (see TestEncodeMatchesIPSet). Every integer is in network
// byte order and flagged so.

const be = nl.NetByteOrder

// writeEntryAttr writes e as one IPSET_ATTR_DATA attribute, with its line
// number.
func writeEntryAttr(w *nl.Writer, e Entry, lineno uint32) {
	n := w.Begin(attrData | nl.Nested)
	writeEntry(w, e)
	w.BE32(attrCADTLine|be, lineno)
	w.End(n)
}

// writeEntry writes the attributes of an entry, in the order ipset(8)
// sends them.
func writeEntry(w *nl.Writer, e Entry) {
	switch {
	case e.Addr.IsValid():
		writeAddr(w, attrIP, e.Addr)
	case e.Net.IsValid():
		writeAddr(w, attrIP, e.Net.Masked().Addr())
		w.Uint8(attrCIDR, uint8(e.Net.Bits()))
	}
	if e.Protocol != 0 || (!e.Addr.IsValid() && !e.Net.IsValid()) {
		w.BE16(attrPort|be, e.Port)
	}
	if e.Protocol != 0 {
		w.Uint8(attrProto, uint8(e.Protocol))
	}
	switch {
	case e.Addr2.IsValid():
		writeAddr(w, attrIP2, e.Addr2)
	case e.Net2.IsValid():
		writeAddr(w, attrIP2, e.Net2.Masked().Addr())
		w.Uint8(attrCIDR2, uint8(e.Net2.Bits()))
	}
	switch {
	case e.Timeout == Permanent:
		w.BE32(attrTimeout|be, 0)
	case e.Timeout > 0:
		w.BE32(attrTimeout|be, seconds(e.Timeout))
	}
	if e.Counters != nil {
		w.BE64(attrBytes|be, e.Counters.Bytes)
		w.BE64(attrPackets|be, e.Counters.Packets)
	}
	if e.Comment != "" {
		w.String(attrComment, e.Comment)
	}
}

// writeAddr writes an address nest: IPSET_ATTR_IPADDR_IPV4 or _IPV6 in
// IPSET_ATTR_IP or IPSET_ATTR_IP2.
func writeAddr(w *nl.Writer, typ uint16, a netip.Addr) {
	n := w.Begin(typ | nl.Nested)
	if a.Is4() {
		w.Addr(attrIPv4|be, a)
	} else {
		w.Addr(attrIPv6|be, a)
	}
	w.End(n)
}
