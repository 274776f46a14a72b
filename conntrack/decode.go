package conntrack

import (
	"errors"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

var errShortMessage = errors.New("ctnetlink message shorter than its nfgenmsg header")

// newDecoder returns a reader of the attributes after a message's
// nfgenmsg header; ctnetlink's integers are in network byte order.
func newDecoder(data []byte) (nl.Reader, error) {
	if len(data) < nl.NFGenMsgLen {
		return nl.Reader{}, errShortMessage
	}
	return nl.NewReader(data[nl.NFGenMsgLen:], "ctnetlink"), nil
}

// decodeFlow decodes the payload of an IPCTNL_MSG_CT_NEW message, as a dump
// or a get returns it.
func decodeFlow(data []byte) (Flow, error) {
	var f Flow
	ad, err := newDecoder(data)
	if err != nil {
		return f, err
	}
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleOrig:
			ad.Nest(func(nad *nl.Reader) { decodeTuple(nad, &f.Orig) })
		case ctaTupleReply:
			ad.Nest(func(nad *nl.Reader) { decodeTuple(nad, &f.Reply) })
		case ctaStatus:
			f.Status = Status(ad.BE32())
		case ctaTimeout:
			f.Timeout = time.Duration(ad.BE32()) * time.Second
		case ctaMark:
			f.Mark = ad.BE32()
		case ctaID:
			f.ID = ad.BE32()
		case ctaZone:
			f.Zone = ad.BE16()
		}
	}
	if err := ad.Err(); err != nil {
		return Flow{}, err
	}
	if !f.Orig.Src.IsValid() || !f.Orig.Dst.IsValid() {
		return Flow{}, errors.New("ctnetlink entry without an original tuple")
	}
	return f, nil
}

func decodeTuple(ad *nl.Reader, t *Tuple) {
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleIP:
			ad.Nest(func(nad *nl.Reader) { decodeAddrs(nad, t) })
		case ctaTupleProto:
			ad.Nest(func(nad *nl.Reader) { decodeProto(nad, t) })
		}
	}
}

func decodeAddrs(ad *nl.Reader, t *Tuple) {
	for ad.Next() {
		var dst *netip.Addr
		switch ad.Type() {
		case ctaIPv4Src, ctaIPv6Src:
			dst = &t.Src
		case ctaIPv4Dst, ctaIPv6Dst:
			dst = &t.Dst
		default:
			continue
		}
		want := 4
		if ad.Type() == ctaIPv6Src || ad.Type() == ctaIPv6Dst {
			want = 16
		}
		b := ad.Bytes()
		if len(b) != want {
			ad.Fail("address of %d bytes, want %d", len(b), want)
			return
		}
		*dst, _ = netip.AddrFromSlice(b)
	}
}

func decodeProto(ad *nl.Reader, t *Tuple) {
	for ad.Next() {
		switch ad.Type() {
		case ctaProtoNum:
			t.Protocol = inet.Protocol(ad.Uint8())
		case ctaProtoSrcPort:
			t.SrcPort = ad.BE16()
		case ctaProtoDstPort:
			t.DstPort = ad.BE16()
		case ctaProtoICMPID, ctaProtoICMPv6ID:
			t.ICMPID = ad.BE16()
		case ctaProtoICMPType, ctaProtoICMPv6Ty:
			t.ICMPType = ad.Uint8()
		case ctaProtoICMPCode, ctaProtoICMPv6Co:
			t.ICMPCode = ad.Uint8()
		}
	}
}

// decodeStatsEntries returns CTA_STATS_GLOBAL_ENTRIES from the reply to
// IPCTNL_MSG_CT_GET_STATS.
func decodeStatsEntries(data []byte) (int, error) {
	ad, err := newDecoder(data)
	if err != nil {
		return 0, err
	}
	n := -1
	for ad.Next() {
		if ad.Type() == ctaStatsGlobalEntries {
			n = int(ad.BE32())
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("ctnetlink statistics without an entry count")
	}
	return n, nil
}
