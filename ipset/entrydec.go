package ipset

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Entries are read with an nl.Reader made for each entry rather than
// one nested in the list's: a dump of a large set holds one nest per entry
// and address, Sync reads whole sets, and a Reader of a constant name
// allocates nothing.

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
	d := nl.NewReader(b, "ipset entry")
	var err error
	for err == nil && d.Next() {
		switch d.Type() {
		case attrIP:
			ip, err = decodeAddr(d.Bytes())
		case attrCIDR:
			cidr = int(d.Uint8())
		case attrPort:
			e.Port = d.BE16()
		case attrProto:
			e.Protocol = inet.Protocol(d.Uint8())
		case attrIP2:
			ip2, err = decodeAddr(d.Bytes())
		case attrCIDR2:
			cidr2 = int(d.Uint8())
		case attrTimeout:
			e.Timeout = time.Duration(d.BE32()) * time.Second
			if e.Timeout == 0 {
				e.Timeout = Permanent
			}
		case attrPackets:
			packets, haveCounters = d.BE64(), true
		case attrBytes:
			bytes, haveCounters = d.BE64(), true
		case attrComment:
			e.Comment = d.String(0)
		}
	}
	if err == nil {
		err = d.Err()
	}
	if err != nil {
		return Entry{}, err
	}
	if haveCounters {
		e.Counters = &Counters{Packets: packets, Bytes: bytes}
	}
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
	d := nl.NewReader(b, "ipset address")
	for d.Next() {
		if d.Type() != attrIPv4 && d.Type() != attrIPv6 {
			continue
		}
		var ok bool
		a, ok = netip.AddrFromSlice(d.Bytes())
		if !ok || (d.Type() == attrIPv4) != a.Is4() {
			return netip.Addr{}, fmt.Errorf("address attribute of %d bytes", len(d.Bytes()))
		}
	}
	return a, d.Err()
}
