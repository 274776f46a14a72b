package ipset

import (
	"encoding/binary"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// Entries are encoded by appending attributes to one buffer rather than
// with netlink.AttributeEncoder, which allocates per attribute: a bulk load
// encodes every entry of a set, and this is its hot path. The layout is the
// same (see TestEncodeMatchesIPSet).

const nlaHeaderLen = 4

// appendEntryAttr appends e as one IPSET_ATTR_DATA attribute, with its line
// number, to b.
func appendEntryAttr(b []byte, e Entry, lineno uint32) []byte {
	start := len(b)
	b = appendAttrHeader(b, attrData|netlink.Nested)
	b = appendEntry(b, e)
	b = appendBE32(b, attrCADTLine, lineno)
	return finishAttr(b, start)
}

// appendEntry appends the attributes of an entry, in the order ipset(8)
// sends them.
func appendEntry(b []byte, e Entry) []byte {
	switch {
	case e.Addr.IsValid():
		b = appendAddr(b, attrIP, e.Addr)
	case e.Net.IsValid():
		b = appendAddr(b, attrIP, e.Net.Masked().Addr())
		b = appendU8(b, attrCIDR, uint8(e.Net.Bits()))
	}
	if e.Proto != 0 || (!e.Addr.IsValid() && !e.Net.IsValid()) {
		b = appendBE16(b, attrPort, e.Port)
	}
	if e.Proto != 0 {
		b = appendU8(b, attrProto, uint8(e.Proto))
	}
	switch {
	case e.Addr2.IsValid():
		b = appendAddr(b, attrIP2, e.Addr2)
	case e.Net2.IsValid():
		b = appendAddr(b, attrIP2, e.Net2.Masked().Addr())
		b = appendU8(b, attrCIDR2, uint8(e.Net2.Bits()))
	}
	switch {
	case e.Timeout == Permanent:
		b = appendBE32(b, attrTimeout, 0)
	case e.Timeout > 0:
		b = appendBE32(b, attrTimeout, seconds(e.Timeout))
	}
	if e.Counters != nil {
		b = appendBE64(b, attrBytes, e.Counters.Bytes)
		b = appendBE64(b, attrPackets, e.Counters.Packets)
	}
	if e.Comment != "" {
		start := len(b)
		b = appendAttrHeader(b, attrComment)
		b = append(b, e.Comment...)
		b = finishAttr(append(b, 0), start)
	}
	return b
}

func appendAddr(b []byte, typ uint16, a netip.Addr) []byte {
	start := len(b)
	b = appendAttrHeader(b, typ|netlink.Nested)
	inner := len(b)
	if a.Is4() {
		b = appendAttrHeader(b, attrIPv4|netlink.NetByteOrder)
		v := a.As4()
		b = append(b, v[:]...)
	} else {
		b = appendAttrHeader(b, attrIPv6|netlink.NetByteOrder)
		v := a.As16()
		b = append(b, v[:]...)
	}
	b = finishAttr(b, inner)
	return finishAttr(b, start)
}

func appendU8(b []byte, typ uint16, v uint8) []byte {
	start := len(b)
	return finishAttr(append(appendAttrHeader(b, typ), v), start)
}

func appendBE16(b []byte, typ uint16, v uint16) []byte {
	start := len(b)
	return finishAttr(binary.BigEndian.AppendUint16(appendAttrHeader(b, typ|netlink.NetByteOrder), v), start)
}

func appendBE32(b []byte, typ uint16, v uint32) []byte {
	start := len(b)
	return finishAttr(binary.BigEndian.AppendUint32(appendAttrHeader(b, typ|netlink.NetByteOrder), v), start)
}

func appendBE64(b []byte, typ uint16, v uint64) []byte {
	start := len(b)
	return finishAttr(binary.BigEndian.AppendUint64(appendAttrHeader(b, typ|netlink.NetByteOrder), v), start)
}

// appendAttrHeader appends an attribute header whose length finishAttr
// fills in.
func appendAttrHeader(b []byte, typ uint16) []byte {
	return binary.NativeEndian.AppendUint16(append(b, 0, 0), typ)
}

// finishAttr sets the length of the attribute that starts at start and pads
// it to 4 bytes.
func finishAttr(b []byte, start int) []byte {
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	for len(b)%nlaHeaderLen != 0 {
		b = append(b, 0)
	}
	return b
}
