package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
)

var errShortMessage = errors.New("ctnetlink message shorter than its nfgenmsg header")

// newDecoder returns a network-byte-order decoder for the attributes after
// a message's nfgenmsg header.
func newDecoder(data []byte) (*netlink.AttributeDecoder, error) {
	if len(data) < 4 {
		return nil, errShortMessage
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return nil, err
	}
	ad.ByteOrder = binary.BigEndian
	return ad, nil
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
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				return decodeTuple(nad, &f.Orig)
			})
		case ctaTupleReply:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				return decodeTuple(nad, &f.Reply)
			})
		case ctaStatus:
			f.Status = Status(ad.Uint32())
		case ctaTimeout:
			f.Timeout = time.Duration(ad.Uint32()) * time.Second
		case ctaMark:
			f.Mark = ad.Uint32()
		case ctaID:
			f.ID = ad.Uint32()
		case ctaZone:
			f.Zone = ad.Uint16()
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

func decodeTuple(ad *netlink.AttributeDecoder, t *Tuple) error {
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleIP:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				return decodeAddrs(nad, t)
			})
		case ctaTupleProto:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				decodeProto(nad, t)
				return nil
			})
		}
	}
	return nil
}

func decodeAddrs(ad *netlink.AttributeDecoder, t *Tuple) error {
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
			return fmt.Errorf("address attribute %d has %d bytes, want %d", ad.Type(), len(b), want)
		}
		*dst, _ = netip.AddrFromSlice(b)
	}
	return nil
}

func decodeProto(ad *netlink.AttributeDecoder, t *Tuple) {
	for ad.Next() {
		switch ad.Type() {
		case ctaProtoNum:
			t.Protocol = Protocol(ad.Uint8())
		case ctaProtoSrcPort:
			t.SrcPort = ad.Uint16()
		case ctaProtoDstPort:
			t.DstPort = ad.Uint16()
		case ctaProtoICMPID, ctaProtoICMPv6ID:
			t.ICMPID = ad.Uint16()
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
			n = int(ad.Uint32())
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
