package conntracktest

import (
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dump answers a dump request with the entries its filter selects, each
// in a message of its own, then NLMSG_DONE. The table is read at once, so
// a dump is never interrupted.
func (k *Kernel) dump(m netlink.Message, r request, now time.Time) []netlink.Message {
	sel, errno := newSelection(r)
	if errno != 0 {
		return []netlink.Message{nl.Ack(m, int(errno), "")}
	}
	var out []netlink.Message
	for _, e := range k.entries {
		if sel.match(&e.flow) {
			out = append(out, reply(m, msgNew, netlink.Multi, flowData(e.report(now))))
		}
	}
	done := reply(m, 0, netlink.Multi, make([]byte, 4))
	done.Header.Type = netlink.Done
	return append(out, done)
}

// selection is a dump's filter as ctnetlink_alloc_filter builds it.
type selection struct {
	family         inet.Family
	mark, markMask uint32
	zone           uint16
	orig, reply    conntrack.Tuple
	origF, replyF  uint32
}

// newSelection reads a dump's filter: CTA_FILTER's flags must be ones the
// kernel knows (else EOPNOTSUPP) and, in this fake, come with a family
// (the package never sends one without), and name the tuple they compare
// (else EINVAL).
func newSelection(r request) (selection, unix.Errno) {
	s := selection{family: r.family, zone: zoneOf(r)}
	if r.mark != nil {
		// A mark without a mask is compared whole.
		s.mark, s.markMask = *r.mark, 0xffffffff
		if r.markMask != nil {
			s.markMask = *r.markMask
		}
	}
	if r.filter == nil {
		return s, 0
	}
	s.origF, s.replyF = r.filter.origFlags, r.filter.replyFlags
	switch {
	case (s.origF|s.replyF)&^filterAll != 0, r.family == 0:
		return s, unix.EOPNOTSUPP
	case s.origF != 0 && r.orig == nil, s.replyF != 0 && r.reply == nil:
		return s, unix.EINVAL
	}
	if r.orig != nil {
		s.orig = *r.orig
	}
	if r.reply != nil {
		s.reply = *r.reply
	}
	return s, 0
}

// match is ctnetlink_filter_match: the family, the mark under its mask,
// a zone other than the default one (Linux 6.8 on), and the flagged
// fields of each tuple.
func (s *selection) match(f *conntrack.Flow) bool {
	switch {
	case s.family != 0 && f.Family() != s.family,
		f.Mark&s.markMask != s.mark,
		s.zone != 0 && f.Zone != s.zone:
		return false
	}
	return matchTuple(&s.orig, &f.Orig, s.origF) && matchTuple(&s.reply, &f.Reply, s.replyF)
}

// matchTuple is ctnetlink_filter_match_tuple: it compares the flagged
// fields, ports only of TCP and UDP. Addresses of both families compare
// as they should; some kernels invert the IPv6 comparison, which package
// conntrack works around by never sending IPv6 addresses in a filter.
func matchTuple(want, got *conntrack.Tuple, flags uint32) bool {
	switch {
	case flags&filterIPSrc != 0 && want.Src != got.Src,
		flags&filterIPDst != 0 && want.Dst != got.Dst,
		flags&filterProto != 0 && want.Protocol != got.Protocol:
		return false
	}
	if got.Protocol != inet.TCP && got.Protocol != inet.UDP {
		return true
	}
	return (flags&filterSrcPort == 0 || want.SrcPort == got.SrcPort) &&
		(flags&filterDstPort == 0 || want.DstPort == got.DstPort)
}
