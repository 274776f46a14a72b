package ipset

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

var errShort = errors.New("message shorter than its nfgenmsg header")

// newDecoder returns a reader of the attributes of an ipset message,
// after its nfgenmsg header; ipset's integers are in network byte order.
func newDecoder(m netlink.Message) (nl.Reader, error) {
	if len(m.Data) < nfgenmsgLen {
		return nl.Reader{}, errShort
	}
	return nl.NewReader(m.Data[nfgenmsgLen:], "ipset"), nil
}

// decodeProtocol reads the kernel's protocol version and the oldest it
// still accepts.
func decodeProtocol(msgs []netlink.Message) (protocol, minimum uint8, err error) {
	if len(msgs) == 0 {
		return 0, 0, errors.New("no reply")
	}
	ad, err := newDecoder(msgs[0])
	if err != nil {
		return 0, 0, err
	}
	for ad.Next() {
		switch ad.Type() {
		case attrProtocol:
			protocol = ad.Uint8()
		case attrProtocolMin:
			minimum = ad.Uint8()
		}
	}
	if err := ad.Err(); err != nil {
		return 0, 0, err
	}
	if protocol == 0 {
		return 0, 0, errors.New("reply has no protocol version")
	}
	return protocol, minimum, nil
}

// decodeType reads the newest revision of a set type from a type reply.
func decodeType(msgs []netlink.Message) (uint8, error) {
	if len(msgs) == 0 {
		return 0, errors.New("no reply")
	}
	ad, err := newDecoder(msgs[0])
	if err != nil {
		return 0, err
	}
	var rev uint8
	var seen bool
	for ad.Next() {
		if ad.Type() == attrRevision {
			rev, seen = ad.Uint8(), true
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, errors.New("type reply has no revision")
	}
	return rev, nil
}

// decodeIndex reads the kernel index from a get-by-name reply.
func decodeIndex(msgs []netlink.Message) (uint16, error) {
	if len(msgs) == 0 {
		return 0, errors.New("no reply")
	}
	ad, err := newDecoder(msgs[0])
	if err != nil {
		return 0, err
	}
	var idx uint16
	var seen bool
	for ad.Next() {
		if ad.Type() == attrIndex {
			idx, seen = ad.BE16(), true
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, errors.New("reply has no index")
	}
	return idx, nil
}

// dumped is one set as a list dump returns it.
type dumped struct {
	header  Header
	entries []Entry
}

// decodeList reads a list dump: per set, a first message with the type and
// header, then messages of entries, each naming its set.
func decodeList(msgs []netlink.Message) ([]dumped, error) {
	var sets []dumped
	for _, m := range msgs {
		if m.Header.Type == netlink.Error || m.Header.Type == netlink.Done {
			continue
		}
		ad, err := newDecoder(m)
		if err != nil {
			return nil, err
		}
		if err := decodeListMessage(&ad, &sets); err != nil {
			return nil, err
		}
	}
	return sets, nil
}

func decodeListMessage(ad *nl.Reader, sets *[]dumped) error {
	var cur *dumped
	for ad.Next() {
		switch ad.Type() {
		case attrSetName:
			name := ad.String(0)
			if n := len(*sets); n == 0 || (*sets)[n-1].header.Name != name {
				*sets = append(*sets, dumped{header: Header{Set: Set{Name: name}}})
			}
			cur = &(*sets)[len(*sets)-1]
		case attrTypeName, attrRevision, attrFamily, attrData, attrADT:
			if cur == nil {
				return errors.New("set attributes before the set's name")
			}
			if err := decodeSetAttr(ad, cur); err != nil {
				return err
			}
		}
	}
	return ad.Err()
}

func decodeSetAttr(ad *nl.Reader, cur *dumped) error {
	switch ad.Type() {
	case attrTypeName:
		cur.header.Type = Type(ad.String(0))
	case attrRevision:
		cur.header.Revision = ad.Uint8()
	case attrFamily:
		cur.header.Family = inet.Family(ad.Uint8())
	case attrData:
		ad.Nest(func(nad *nl.Reader) { decodeHeaderData(nad, &cur.header) })
	case attrADT:
		l, ok := cur.header.Type.layout()
		if !ok {
			return fmt.Errorf("set %s: %w", cur.header.Name, typeError(cur.header.Type))
		}
		if cur.entries == nil {
			// The header's count saves regrowing; capped, as it comes
			// from outside.
			cur.entries = make([]Entry, 0, min(cur.header.Entries, 1<<17))
		}
		// An entry's error is returned as decodeEntry words it; the
		// Reader's own errors come through ad.Err.
		var err error
		ad.Nest(func(nad *nl.Reader) {
			for err == nil && nad.Next() {
				if nad.Type() != attrData {
					continue
				}
				var e Entry
				if e, err = decodeEntry(nad.Bytes(), l); err == nil {
					cur.entries = append(cur.entries, e)
				}
			}
		})
		return err
	}
	return nil
}

func decodeHeaderData(ad *nl.Reader, h *Header) {
	for ad.Next() {
		switch ad.Type() {
		case attrPort:
			h.PortFrom = ad.BE16()
		case attrPortTo:
			h.PortTo = ad.BE16()
		case attrTimeout:
			h.Timeout = time.Duration(ad.BE32()) * time.Second
		case attrCADTFlags:
			flags := ad.BE32()
			h.Counters = flags&flagWithCounters != 0
			h.Comment = flags&flagWithComment != 0
		case attrInitVal:
			h.InitVal = ad.BE32()
		case attrHashSize:
			h.HashSize = ad.BE32()
		case attrMaxElem:
			h.MaxElem = ad.BE32()
		case attrBucket:
			h.BucketSize = ad.Uint8()
		case attrElements:
			h.Entries = ad.BE32()
		case attrRefs:
			h.References = ad.BE32()
		case attrMemSize:
			h.MemSize = ad.BE32()
		}
	}
}

// place puts a decoded address where the set type wants it.
func place(p part, a netip.Addr, cidr int) (netip.Addr, netip.Prefix, error) {
	switch p {
	case partAddr:
		if !a.IsValid() {
			return netip.Addr{}, netip.Prefix{}, errors.New("entry has no address")
		}
		return a, netip.Prefix{}, nil
	case partNet:
		if !a.IsValid() {
			return netip.Addr{}, netip.Prefix{}, errors.New("entry has no address")
		}
		if cidr < 0 {
			cidr = a.BitLen()
		}
		n, err := a.Prefix(cidr)
		if err != nil {
			return netip.Addr{}, netip.Prefix{}, err
		}
		return netip.Addr{}, n, nil
	}
	return netip.Addr{}, netip.Prefix{}, nil
}

// decodeLineNo reads the failed entry's line number from the error the
// kernel sends for a bulk request: the request itself, echoed with its
// IPSET_ATTR_LINENO set to the number of the entry that failed; echo is
// the request as the error carries it, from its header on.
func decodeLineNo(echo []byte) (uint32, bool) {
	if len(echo) < nl.HeaderLen+nfgenmsgLen {
		return 0, false
	}
	ad := nl.NewReader(echo[nl.HeaderLen+nfgenmsgLen:], "ipset")
	for ad.Next() {
		if ad.Type() == attrLineNo {
			n := ad.BE32()
			return n, ad.Err() == nil && n != 0
		}
	}
	return 0, false
}
