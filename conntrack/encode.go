package conntrack

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
)

// newEncoder returns an attribute encoder in network byte order, which
// ctnetlink uses for every integer except the CTA_FILTER flags.
func newEncoder() *netlink.AttributeEncoder {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	return ae
}

// request builds a ctnetlink message: header type, nfgenmsg, attributes.
func request(typ uint8, flags netlink.HeaderFlags, family Family, attrs []byte) netlink.Message {
	data := make([]byte, 4, 4+len(attrs))
	data[0] = byte(family)
	// data[1] is the nfnetlink version (NFNETLINK_V0), data[2:4] res_id.
	data = append(data, attrs...)
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(subsysCTNetlink<<8 | uint16(typ)),
			Flags: netlink.Request | flags,
		},
		Data: data,
	}
}

// encodeTuple writes a complete tuple, as the kernel needs it to look up or
// create an entry.
func encodeTuple(ae *netlink.AttributeEncoder, typ uint16, t Tuple) {
	ae.Nested(typ, func(nae *netlink.AttributeEncoder) error {
		nae.Nested(ctaTupleIP, func(ip *netlink.AttributeEncoder) error {
			encodeAddrs(ip, t, true, true)
			return nil
		})
		nae.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
			encodeProto(p, t, true, true)
			return nil
		})
		return nil
	})
}

func encodeAddrs(ae *netlink.AttributeEncoder, t Tuple, src, dst bool) {
	if t.Src.Is4() || t.Dst.Is4() {
		if src {
			a := t.Src.As4()
			ae.Bytes(ctaIPv4Src, a[:])
		}
		if dst {
			a := t.Dst.As4()
			ae.Bytes(ctaIPv4Dst, a[:])
		}
		return
	}
	if src {
		a := t.Src.As16()
		ae.Bytes(ctaIPv6Src, a[:])
	}
	if dst {
		a := t.Dst.As16()
		ae.Bytes(ctaIPv6Dst, a[:])
	}
}

func encodeProto(ae *netlink.AttributeEncoder, t Tuple, src, dst bool) {
	ae.Uint8(ctaProtoNum, uint8(t.Protocol))
	switch {
	case t.Protocol.hasPorts():
		if src {
			ae.Uint16(ctaProtoSrcPort, t.SrcPort)
		}
		if dst {
			ae.Uint16(ctaProtoDstPort, t.DstPort)
		}
	case !src || !dst:
		// A filter never compares ICMP fields; only complete tuples carry
		// them.
	case t.Protocol == ICMP:
		ae.Uint16(ctaProtoICMPID, t.ICMPID)
		ae.Uint8(ctaProtoICMPType, t.ICMPType)
		ae.Uint8(ctaProtoICMPCode, t.ICMPCode)
	case t.Protocol == ICMPv6:
		ae.Uint16(ctaProtoICMPv6ID, t.ICMPID)
		ae.Uint8(ctaProtoICMPv6Ty, t.ICMPType)
		ae.Uint8(ctaProtoICMPv6Co, t.ICMPCode)
	}
}

// validTuple checks what the kernel would otherwise reject with a bare
// EINVAL.
func validTuple(t Tuple) error {
	if !t.Src.IsValid() || !t.Dst.IsValid() {
		return fmt.Errorf("tuple %v: source and destination addresses are required", t)
	}
	if t.Src.Is4() != t.Dst.Is4() {
		return fmt.Errorf("tuple %v: source and destination of different families", t)
	}
	if t.Protocol == 0 {
		return fmt.Errorf("tuple %v: protocol is required", t)
	}
	return nil
}

// encodeNew builds the message that creates f, in the attribute order the
// conntrack program uses. A zero Reply is the reversed Orig.
func encodeNew(f Flow, ack bool) (netlink.Message, error) {
	reply := f.Reply
	if !reply.Src.IsValid() {
		reply = f.Orig.Reverse()
	}
	if err := validTuple(f.Orig); err != nil {
		return netlink.Message{}, err
	}
	if err := validTuple(reply); err != nil {
		return netlink.Message{}, err
	}
	ae := newEncoder()
	encodeTuple(ae, ctaTupleOrig, f.Orig)
	encodeTuple(ae, ctaTupleReply, reply)
	if f.Status != 0 {
		ae.Uint32(ctaStatus, uint32(f.Status))
	}
	if f.Timeout > 0 {
		ae.Uint32(ctaTimeout, uint32((f.Timeout+time.Second-1)/time.Second))
	}
	if f.Mark != 0 {
		ae.Uint32(ctaMark, f.Mark)
	}
	if f.Zone != 0 {
		ae.Uint16(ctaZone, f.Zone)
	}
	b, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	flags := netlink.Create | netlink.Excl
	if ack {
		flags |= netlink.Acknowledge
	}
	return request(msgNew, flags, f.Family(), b), nil
}

// encodeLookup builds a get or delete of the entry with orig in zone; a
// nonzero id restricts a delete to that incarnation.
func encodeLookup(typ uint8, orig Tuple, zone uint16, id uint32, ack bool) (netlink.Message, error) {
	if err := validTuple(orig); err != nil {
		return netlink.Message{}, err
	}
	ae := newEncoder()
	encodeTuple(ae, ctaTupleOrig, orig)
	if zone != 0 {
		ae.Uint16(ctaZone, zone)
	}
	if id != 0 {
		ae.Uint32(ctaID, id)
	}
	b, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	var flags netlink.HeaderFlags
	if ack {
		flags = netlink.Acknowledge
	}
	return request(typ, flags, familyOf(orig.Src), b), nil
}

// encodeFlush builds the delete of every entry of a family (0: all). The
// kernel (since Linux 4.19) honours the family of a flush only when the
// nfgenmsg version is nonzero; with version 0 it flushes both families.
func encodeFlush(family Family) netlink.Message {
	m := request(msgDelete, netlink.Acknowledge, family, nil)
	if family != 0 {
		m.Data[1] = 1
	}
	return m
}

// encodeStats builds the request for the table's global counters.
func encodeStats() netlink.Message {
	return request(msgGetStats, 0, 0, nil)
}
