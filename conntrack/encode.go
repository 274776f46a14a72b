package conntrack

import (
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// request builds a ctnetlink request: message type, then data, which
// starts with the nfgenmsg newWriter wrote.
func request(typ uint8, flags netlink.HeaderFlags, data []byte) *nl.Request {
	return &nl.Request{Type: nl.NFType(subsysCTNetlink, typ), Flags: flags, Data: data}
}

// newWriter starts a message's data with its nfgenmsg; ctnetlink's
// integers are in network byte order, except the CTA_FILTER flags.
func newWriter(family inet.Family) *nl.Writer {
	return &nl.Writer{B: nl.AppendNFGenMsg(make([]byte, 0, 128), uint8(family), nl.NFNetlinkV0)}
}

// encodeTuple writes a complete tuple, as the kernel needs it to look up or
// create an entry.
func encodeTuple(w *nl.Writer, typ uint16, t Tuple) {
	n := w.Begin(typ | nl.Nested)
	ip := w.Begin(ctaTupleIP | nl.Nested)
	encodeAddrs(w, t, true, true)
	w.End(ip)
	p := w.Begin(ctaTupleProto | nl.Nested)
	encodeProto(w, t, true, true)
	w.End(p)
	w.End(n)
}

func encodeAddrs(w *nl.Writer, t Tuple, src, dst bool) {
	if t.Src.Is4() || t.Dst.Is4() {
		if src {
			w.Addr(ctaIPv4Src, t.Src)
		}
		if dst {
			w.Addr(ctaIPv4Dst, t.Dst)
		}
		return
	}
	if src {
		w.Addr(ctaIPv6Src, t.Src)
	}
	if dst {
		w.Addr(ctaIPv6Dst, t.Dst)
	}
}

func encodeProto(w *nl.Writer, t Tuple, src, dst bool) {
	w.Uint8(ctaProtoNum, uint8(t.Protocol))
	switch {
	case hasPorts(t.Protocol):
		if src {
			w.BE16(ctaProtoSrcPort, t.SrcPort)
		}
		if dst {
			w.BE16(ctaProtoDstPort, t.DstPort)
		}
	case !src || !dst:
		// A filter never compares ICMP fields; only complete tuples carry
		// them.
	case t.Protocol == inet.ICMP:
		w.BE16(ctaProtoICMPID, t.ICMPID)
		w.Uint8(ctaProtoICMPType, t.ICMPType)
		w.Uint8(ctaProtoICMPCode, t.ICMPCode)
	case t.Protocol == inet.ICMPv6:
		w.BE16(ctaProtoICMPv6ID, t.ICMPID)
		w.Uint8(ctaProtoICMPv6Ty, t.ICMPType)
		w.Uint8(ctaProtoICMPv6Co, t.ICMPCode)
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
func encodeNew(f Flow, ack bool) (*nl.Request, error) {
	reply := f.Reply
	if !reply.Src.IsValid() {
		reply = f.Orig.Reverse()
	}
	if err := validTuple(f.Orig); err != nil {
		return nil, err
	}
	if err := validTuple(reply); err != nil {
		return nil, err
	}
	w := newWriter(f.Family())
	encodeTuple(w, ctaTupleOrig, f.Orig)
	encodeTuple(w, ctaTupleReply, reply)
	if f.Status != 0 {
		w.BE32(ctaStatus, uint32(f.Status))
	}
	if f.Timeout > 0 {
		w.BE32(ctaTimeout, uint32((f.Timeout+time.Second-1)/time.Second))
	}
	if f.Mark != 0 {
		w.BE32(ctaMark, f.Mark)
	}
	if f.Zone != 0 {
		w.BE16(ctaZone, f.Zone)
	}
	flags := netlink.Create | netlink.Excl
	if ack {
		flags |= netlink.Acknowledge
	}
	return request(msgNew, flags, w.B), nil
}

// encodeLookup builds a get or delete of the entry with orig in zone; a
// nonzero id restricts a delete to that incarnation.
func encodeLookup(typ uint8, orig Tuple, zone uint16, id uint32, ack bool) (*nl.Request, error) {
	if err := validTuple(orig); err != nil {
		return nil, err
	}
	w := newWriter(inet.FamilyOf(orig.Src))
	encodeTuple(w, ctaTupleOrig, orig)
	if zone != 0 {
		w.BE16(ctaZone, zone)
	}
	if id != 0 {
		w.BE32(ctaID, id)
	}
	var flags netlink.HeaderFlags
	if ack {
		flags = netlink.Acknowledge
	}
	return request(typ, flags, w.B), nil
}

// encodeFlush builds the delete of every entry of a family (0: all). The
// kernel (since Linux 4.19) honours the family of a flush only when the
// nfgenmsg version is nonzero; with version 0 it flushes both families.
func encodeFlush(family inet.Family) *nl.Request {
	version := uint8(nl.NFNetlinkV0)
	if family != 0 {
		version = 1
	}
	return request(msgDelete, netlink.Acknowledge, nl.AppendNFGenMsg(nil, uint8(family), version))
}

// encodeStats builds the request for the table's global counters.
func encodeStats() *nl.Request {
	return request(msgGetStats, 0, nl.AppendNFGenMsg(nil, 0, nl.NFNetlinkV0))
}
