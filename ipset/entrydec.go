package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"net/netip"
	"strings"
	"time"
)

const nlaLen = 4 // struct nlattr

// Entries are decoded by walking the attribute bytes in place rather than
// with netlink.AttributeDecoder, which allocates per nested attribute: a
// dump of a large set holds one nest per entry and address, and Sync reads
// whole sets.

var errMalformed = errors.New("malformed netlink attribute")

// attrIter walks the netlink attributes in b.
type attrIter struct {
	b    []byte
	typ  uint16 // without the nested and byte-order flags
	data []byte
	err  error
}

const attrTypeMask = 0x3fff // ^(NLA_F_NESTED | NLA_F_NET_BYTEORDER)

func (it *attrIter) next() bool {
	if len(it.b) < nlaLen {
		if len(it.b) != 0 && it.err == nil {
			it.err = errMalformed
		}
		return false
	}
	n := int(binary.NativeEndian.Uint16(it.b))
	if n < nlaLen || n > len(it.b) {
		it.err = errMalformed
		return false
	}
	it.typ = binary.NativeEndian.Uint16(it.b[2:]) & attrTypeMask
	it.data = it.b[nlaLen:n]
	it.b = it.b[min(nl.Align(n), len(it.b)):]
	return true
}

// uintN reads a big-endian value of exactly size bytes.
func (it *attrIter) uintN(size int) uint64 {
	if len(it.data) != size {
		it.err = fmt.Errorf("attribute %d has %d bytes, want %d", it.typ, len(it.data), size)
		return 0
	}
	switch size {
	case 1:
		return uint64(it.data[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(it.data))
	case 4:
		return uint64(binary.BigEndian.Uint32(it.data))
	}
	return binary.BigEndian.Uint64(it.data)
}

// decodeEntry reads one entry from the payload of an IPSET_ATTR_DATA; l
// says whether an address with a prefix length is an address or a network.
func decodeEntry(b []byte, l layout) (Entry, error) {
	var (
		e            Entry
		ip, ip2      netip.Addr
		cidr, cidr2  = -1, -1
		packets      uint64
		bytes        uint64
		haveCounters bool
	)
	it := attrIter{b: b}
	for it.err == nil && it.next() {
		switch it.typ {
		case attrIP:
			ip, it.err = decodeAddr(it.data)
		case attrCIDR:
			cidr = int(it.uintN(1))
		case attrPort:
			e.Port = uint16(it.uintN(2))
		case attrProto:
			e.Protocol = inet.Protocol(it.uintN(1))
		case attrIP2:
			ip2, it.err = decodeAddr(it.data)
		case attrCIDR2:
			cidr2 = int(it.uintN(1))
		case attrTimeout:
			e.Timeout = time.Duration(it.uintN(4)) * time.Second
			if e.Timeout == 0 {
				e.Timeout = Permanent
			}
		case attrPackets:
			packets, haveCounters = it.uintN(8), true
		case attrBytes:
			bytes, haveCounters = it.uintN(8), true
		case attrComment:
			e.Comment, _, _ = strings.Cut(string(it.data), "\x00")
		}
	}
	if it.err != nil {
		return Entry{}, it.err
	}
	if haveCounters {
		e.Counters = &Counters{Packets: packets, Bytes: bytes}
	}
	var err error
	if e.Addr, e.Net, err = place(l.first, ip, cidr); err != nil {
		return Entry{}, err
	}
	if e.Addr2, e.Net2, err = place(l.second, ip2, cidr2); err != nil {
		return Entry{}, err
	}
	if l.bitmap {
		e.Protocol = 0
	}
	return e, nil
}

// decodeAddr reads the address nested in IPSET_ATTR_IP or IPSET_ATTR_IP2.
func decodeAddr(b []byte) (netip.Addr, error) {
	var a netip.Addr
	it := attrIter{b: b}
	for it.next() {
		if it.typ != attrIPv4 && it.typ != attrIPv6 {
			continue
		}
		var ok bool
		a, ok = netip.AddrFromSlice(it.data)
		if !ok || (it.typ == attrIPv4) != a.Is4() {
			return netip.Addr{}, fmt.Errorf("address attribute of %d bytes", len(it.data))
		}
	}
	return a, it.err
}
