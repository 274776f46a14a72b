package conntracktest

import (
	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Numbers from include/uapi/linux/netfilter/nfnetlink_conntrack.h, read
// on the fake's own; the CTA_FILTER_F_* bits are in
// net/netfilter/nf_conntrack_netlink.c.
const (
	subsysCTNetlink = 1

	msgNew      = 0 // IPCTNL_MSG_CT_NEW
	msgGet      = 1 // IPCTNL_MSG_CT_GET
	msgDelete   = 2 // IPCTNL_MSG_CT_DELETE
	msgGetStats = 5 // IPCTNL_MSG_CT_GET_STATS

	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaStatus     = 3
	ctaTimeout    = 7
	ctaMark       = 8
	ctaUse        = 11
	ctaID         = 12
	ctaZone       = 18
	ctaMarkMask   = 21
	ctaFilter     = 25

	ctaTupleIP    = 1
	ctaTupleProto = 2

	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4

	ctaProtoNum      = 1
	ctaProtoSrcPort  = 2
	ctaProtoDstPort  = 3
	ctaProtoICMPID   = 4
	ctaProtoICMPType = 5
	ctaProtoICMPCode = 6
	ctaProtoICMPv6ID = 7
	ctaProtoICMPv6Ty = 8
	ctaProtoICMPv6Co = 9

	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2

	filterIPSrc   = 1 << 0
	filterIPDst   = 1 << 1
	filterICMP    = 1 << 2 // CTA_FILTER_F_ICMP_TYPE, _CODE and _ID together
	filterProto   = 1 << 3
	filterSrcPort = 1 << 4
	filterDstPort = 1 << 5
	// filterAll is every flag the kernel knows (CTA_FILTER_F_ALL); others
	// are EOPNOTSUPP.
	filterAll = 0x3ff

	ctaStatsGlobalEntries    = 1
	ctaStatsGlobalMaxEntries = 2
)

// hasPorts says whether the kernel keys the protocol by ports.
func hasPorts(p inet.Protocol) bool {
	switch p {
	case inet.TCP, inet.UDP, inet.DCCP, inet.SCTP, inet.UDPLite:
		return true
	}
	return false
}

// request is what the fake reads of a ctnetlink message.
type request struct {
	family   inet.Family
	version  uint8
	orig     *conntrack.Tuple
	reply    *conntrack.Tuple
	status   *conntrack.Status
	timeout  *uint32
	mark     *uint32
	markMask *uint32
	id       *uint32
	zone     *uint16
	filter   *dumpFilter
}

// dumpFilter is CTA_FILTER: which fields of the request's tuples a dump
// compares.
type dumpFilter struct {
	origFlags, replyFlags uint32
}

// parseRequest reads a ctnetlink message's nfgenmsg and attributes; a
// message the kernel could not parse is EINVAL, which ok false stands for.
func parseRequest(data []byte) (request, bool) {
	var r request
	if len(data) < nl.NFGenMsgLen {
		return r, false
	}
	r.family, r.version = inet.Family(data[0]), data[1]
	d := nl.NewReader(data[nl.NFGenMsgLen:], "ctnetlink")
	for d.Next() {
		switch d.Type() {
		case ctaTupleOrig:
			r.orig = &conntrack.Tuple{}
			d.Nest(func(n *nl.Reader) { parseTuple(n, r.orig) })
		case ctaTupleReply:
			r.reply = &conntrack.Tuple{}
			d.Nest(func(n *nl.Reader) { parseTuple(n, r.reply) })
		case ctaStatus:
			s := conntrack.Status(d.BE32())
			r.status = &s
		case ctaTimeout:
			r.timeout = ptr(d.BE32())
		case ctaMark:
			r.mark = ptr(d.BE32())
		case ctaMarkMask:
			r.markMask = ptr(d.BE32())
		case ctaID:
			r.id = ptr(d.BE32())
		case ctaZone:
			r.zone = ptr(d.BE16())
		case ctaFilter:
			r.filter = &dumpFilter{}
			d.Nest(func(n *nl.Reader) { parseFilter(n, r.filter) })
		}
	}
	return r, d.Err() == nil
}

func ptr[T any](v T) *T { return &v }

func parseFilter(d *nl.Reader, f *dumpFilter) {
	for d.Next() {
		switch d.Type() {
		case ctaFilterOrigFlags:
			f.origFlags = d.Uint32()
		case ctaFilterReplyFlags:
			f.replyFlags = d.Uint32()
		}
	}
}

func parseTuple(d *nl.Reader, t *conntrack.Tuple) {
	for d.Next() {
		switch d.Type() {
		case ctaTupleIP:
			d.Nest(func(n *nl.Reader) { parseAddrs(n, t) })
		case ctaTupleProto:
			d.Nest(func(n *nl.Reader) { parseProto(n, t) })
		}
	}
}

func parseAddrs(d *nl.Reader, t *conntrack.Tuple) {
	for d.Next() {
		switch d.Type() {
		case ctaIPv4Src, ctaIPv6Src:
			t.Src = d.Addr()
		case ctaIPv4Dst, ctaIPv6Dst:
			t.Dst = d.Addr()
		}
	}
}

func parseProto(d *nl.Reader, t *conntrack.Tuple) {
	for d.Next() {
		switch d.Type() {
		case ctaProtoNum:
			t.Protocol = inet.Protocol(d.Uint8())
		case ctaProtoSrcPort:
			t.SrcPort = d.BE16()
		case ctaProtoDstPort:
			t.DstPort = d.BE16()
		case ctaProtoICMPID, ctaProtoICMPv6ID:
			t.ICMPID = d.BE16()
		case ctaProtoICMPType, ctaProtoICMPv6Ty:
			t.ICMPType = d.Uint8()
		case ctaProtoICMPCode, ctaProtoICMPv6Co:
			t.ICMPCode = d.Uint8()
		}
	}
}

// flowData is the payload of the IPCTNL_MSG_CT_NEW message by which the
// kernel reports an entry, in ctnetlink_fill_info's order of the
// attributes the fake keeps.
func flowData(f conntrack.Flow) []byte {
	w := &nl.Writer{B: nl.AppendNFGenMsg(nil, uint8(f.Family()), nl.NFNetlinkV0)}
	writeTuple(w, ctaTupleOrig, f.Orig)
	writeTuple(w, ctaTupleReply, f.Reply)
	if f.Zone != 0 {
		w.BE16(ctaZone, f.Zone)
	}
	w.BE32(ctaStatus, uint32(f.Status))
	w.BE32(ctaTimeout, uint32(f.Timeout.Seconds()))
	w.BE32(ctaMark, f.Mark)
	w.BE32(ctaID, f.ID)
	w.BE32(ctaUse, 1)
	return w.B
}

func writeTuple(w *nl.Writer, typ uint16, t conntrack.Tuple) {
	n := w.Begin(typ | nl.Nested)
	ip := w.Begin(ctaTupleIP | nl.Nested)
	src, dst := uint16(ctaIPv4Src), uint16(ctaIPv4Dst)
	if t.Src.Is6() {
		src, dst = ctaIPv6Src, ctaIPv6Dst
	}
	w.Addr(src, t.Src)
	w.Addr(dst, t.Dst)
	w.End(ip)
	p := w.Begin(ctaTupleProto | nl.Nested)
	w.Uint8(ctaProtoNum, uint8(t.Protocol))
	switch {
	case hasPorts(t.Protocol):
		w.BE16(ctaProtoSrcPort, t.SrcPort)
		w.BE16(ctaProtoDstPort, t.DstPort)
	case t.Protocol == inet.ICMP:
		w.BE16(ctaProtoICMPID, t.ICMPID)
		w.Uint8(ctaProtoICMPType, t.ICMPType)
		w.Uint8(ctaProtoICMPCode, t.ICMPCode)
	case t.Protocol == inet.ICMPv6:
		w.BE16(ctaProtoICMPv6ID, t.ICMPID)
		w.Uint8(ctaProtoICMPv6Ty, t.ICMPType)
		w.Uint8(ctaProtoICMPv6Co, t.ICMPCode)
	}
	w.End(p)
	w.End(n)
}

// statsData is the reply to IPCTNL_MSG_CT_GET_STATS.
func statsData(entries, max uint32) []byte {
	w := &nl.Writer{B: nl.AppendNFGenMsg(nil, 0, nl.NFNetlinkV0)}
	w.BE32(ctaStatsGlobalEntries, entries)
	w.BE32(ctaStatsGlobalMaxEntries, max)
	return w.B
}

// validTuple is what ctnetlink_parse_tuple needs: both addresses, of one
// family, and a protocol.
func validTuple(t *conntrack.Tuple) bool {
	return t != nil && t.Src.IsValid() && t.Dst.IsValid() && t.Src.Is4() == t.Dst.Is4() && t.Protocol != 0
}
