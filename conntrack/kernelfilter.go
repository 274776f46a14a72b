package conntrack

import (
	"net/netip"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// families returns the families to dump. The kernel applies tuple filters
// only to a dump of one family, so a filter with tuple fields but no
// family takes one dump per family.
func (f *Filter) families() []inet.Family {
	if f == nil {
		return []inet.Family{0}
	}
	fam := f.Family
	for _, a := range []netip.Addr{f.Orig.Src, f.Orig.Dst, f.Reply.Src, f.Reply.Dst} {
		if af := inet.FamilyOf(a); af != 0 {
			fam = af
		}
	}
	if fam != 0 {
		return []inet.Family{fam}
	}
	if f.Protocol != 0 || !f.Orig.isZero() || !f.Reply.isZero() {
		return []inet.Family{inet.IPv4, inet.IPv6}
	}
	return []inet.Family{0}
}

// kernelLevel is how much of a Filter the running kernel accepts in a dump
// request; a Conn starts at the top and steps down when the kernel refuses.
type kernelLevel int32

const (
	// levelFamily: only the family in the nfgenmsg header (every kernel).
	levelFamily kernelLevel = iota
	// levelMark: also CTA_MARK/CTA_MARK_MASK and CTA_ZONE (which kernels
	// before 6.8 accept and ignore in a dump; the Go side checks it).
	levelMark
	// levelTuple: also CTA_FILTER with tuple fields (Linux 5.8 and later).
	levelTuple
)

// dumpRequest builds the dump of one family with as much of the filter as
// level allows.
func (f *Filter) dumpRequest(family inet.Family, level kernelLevel) (*nl.Request, error) {
	flags := netlink.Dump
	if f == nil || level == levelFamily {
		return request(msgGet, flags, newWriter(family).B), nil
	}
	w := newWriter(family)
	if level >= levelTuple && family != 0 {
		origFlags := f.Orig.kernelTuple(w, ctaTupleOrig, family, f.Protocol)
		replyFlags := f.Reply.kernelTuple(w, ctaTupleReply, family, f.Protocol)
		if origFlags != 0 || replyFlags != 0 {
			n := w.Begin(ctaFilter | nl.Nested)
			// The flags are NLA_U32 in host byte order.
			if origFlags != 0 {
				w.Uint32(ctaFilterOrigFlags, origFlags)
			}
			if replyFlags != 0 {
				w.Uint32(ctaFilterReplyFlags, replyFlags)
			}
			w.End(n)
		}
	}
	if f.MarkMask != 0 {
		w.BE32(ctaMark, f.Mark&f.MarkMask)
		w.BE32(ctaMarkMask, f.MarkMask)
	}
	if f.Zone != nil {
		w.BE16(ctaZone, *f.Zone)
	}
	return request(msgGet, flags, w.B), nil
}

// kernelTuple writes the tuple attribute of a CTA_FILTER and returns its
// CTA_FILTER_F_* flags, 0 (and nothing written) when the kernel has nothing
// to compare in this direction.
//
// IPv6 addresses are left to the Go side: the kernel's IPv6 address
// comparison in ctnetlink_filter_match_tuple is inverted (it drops the
// entries that match) on many kernels, Debian's 5.10 and 6.1 and 6.18.44
// among them, though not on Debian 13's 6.12.118 (TestKernelIPv6DumpFilter).
func (t TupleFilter) kernelTuple(w *nl.Writer, typ uint16, family inet.Family, proto inet.Protocol) uint32 {
	var flags uint32
	var tu Tuple
	if family == inet.IPv4 {
		if t.Src.IsValid() {
			flags |= filterIPSrc
			tu.Src = t.Src
		}
		if t.Dst.IsValid() {
			flags |= filterIPDst
			tu.Dst = t.Dst
		}
	}
	if proto != 0 {
		flags |= filterProto
		tu.Protocol = proto
		if hasPorts(proto) && t.SrcPort != 0 {
			flags |= filterSrcPort
			tu.SrcPort = t.SrcPort
		}
		if hasPorts(proto) && t.DstPort != 0 {
			flags |= filterDstPort
			tu.DstPort = t.DstPort
		}
	}
	if flags&^filterProto == 0 && typ == ctaTupleReply {
		// The protocol is the same in both directions; the original tuple
		// already carries it.
		return 0
	}
	if flags == 0 {
		return 0
	}
	n := w.Begin(typ | nl.Nested)
	if flags&(filterIPSrc|filterIPDst) != 0 {
		ip := w.Begin(ctaTupleIP | nl.Nested)
		encodeAddrs(w, tu, flags&filterIPSrc != 0, flags&filterIPDst != 0)
		w.End(ip)
	}
	if flags&filterProto != 0 {
		p := w.Begin(ctaTupleProto | nl.Nested)
		encodeProto(w, tu, flags&filterSrcPort != 0, flags&filterDstPort != 0)
		w.End(p)
	}
	w.End(n)
	return flags
}
