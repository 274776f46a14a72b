package conntrack

import (
	"encoding/binary"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// families returns the families to dump. The kernel applies tuple filters
// only to a dump of one family, so a filter with tuple fields but no
// family takes one dump per family.
func (f *Filter) families() []Family {
	if f == nil {
		return []Family{0}
	}
	fam := f.Family
	for _, a := range []netip.Addr{f.Orig.Src, f.Orig.Dst, f.Reply.Src, f.Reply.Dst} {
		if af := familyOf(a); af != 0 {
			fam = af
		}
	}
	if fam != 0 {
		return []Family{fam}
	}
	if f.Protocol != 0 || !f.Orig.isZero() || !f.Reply.isZero() {
		return []Family{IPv4, IPv6}
	}
	return []Family{0}
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
func (f *Filter) dumpRequest(family Family, level kernelLevel) (netlink.Message, error) {
	flags := netlink.Dump
	if f == nil || level == levelFamily {
		return request(msgGet, flags, family, nil), nil
	}
	ae := newEncoder()
	if level >= levelTuple && family != 0 {
		origFlags := f.Orig.kernelTuple(ae, ctaTupleOrig, family, f.Protocol)
		replyFlags := f.Reply.kernelTuple(ae, ctaTupleReply, family, f.Protocol)
		if origFlags != 0 || replyFlags != 0 {
			ae.Nested(ctaFilter, func(nae *netlink.AttributeEncoder) error {
				// The flags are NLA_U32 in host byte order.
				nae.ByteOrder = binary.NativeEndian
				if origFlags != 0 {
					nae.Uint32(ctaFilterOrigFlags, origFlags)
				}
				if replyFlags != 0 {
					nae.Uint32(ctaFilterReplyFlags, replyFlags)
				}
				return nil
			})
		}
	}
	if f.MarkMask != 0 {
		ae.Uint32(ctaMark, f.Mark&f.MarkMask)
		ae.Uint32(ctaMarkMask, f.MarkMask)
	}
	if f.Zone != nil {
		ae.Uint16(ctaZone, *f.Zone)
	}
	b, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return request(msgGet, flags, family, b), nil
}

// kernelTuple writes the tuple attribute of a CTA_FILTER and returns its
// CTA_FILTER_F_* flags, 0 (and nothing written) when the kernel has nothing
// to compare in this direction.
//
// IPv6 addresses are left to the Go side: the kernel's IPv6 address
// comparison in ctnetlink_filter_match_tuple is inverted (it drops the
// entries that match) on many kernels, Debian's 5.10 and 6.1 and 6.18.44
// among them, though not on Debian 13's 6.12.118 (TestKernelIPv6DumpFilter).
func (t TupleFilter) kernelTuple(ae *netlink.AttributeEncoder, typ uint16, family Family, proto Protocol) uint32 {
	var flags uint32
	var tu Tuple
	if family == IPv4 {
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
		if proto.hasPorts() && t.SrcPort != 0 {
			flags |= filterSrcPort
			tu.SrcPort = t.SrcPort
		}
		if proto.hasPorts() && t.DstPort != 0 {
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
	ae.Nested(typ, func(nae *netlink.AttributeEncoder) error {
		if flags&(filterIPSrc|filterIPDst) != 0 {
			nae.Nested(ctaTupleIP, func(ip *netlink.AttributeEncoder) error {
				encodeAddrs(ip, tu, flags&filterIPSrc != 0, flags&filterIPDst != 0)
				return nil
			})
		}
		if flags&filterProto != 0 {
			nae.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
				encodeProto(p, tu, flags&filterSrcPort != 0, flags&filterDstPort != 0)
				return nil
			})
		}
		return nil
	})
	return flags
}
