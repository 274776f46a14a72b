package ipsettest

import (
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipset"
	"golang.org/x/sys/unix"
)

// part is what one position of an entry holds.
type part uint8

const (
	partNone part = iota
	partAddr
	partNet
)

// layout is a set type's entry: an address or network, a protocol and
// port, a second address or network.
type layout struct {
	first, second part
	port          bool
	// revision is the newest revision the fake offers: the fake's own
	// numbers, which need not match a given kernel's.
	revision uint8
}

// layoutOf returns the layout of a set type the fake knows.
func layoutOf(t ipset.Type) (layout, bool) {
	switch t {
	case ipset.HashIP:
		return layout{first: partAddr, revision: 6}, true
	case ipset.HashIPPort:
		return layout{first: partAddr, port: true, revision: 6}, true
	case ipset.HashIPPortIP:
		return layout{first: partAddr, port: true, second: partAddr, revision: 6}, true
	case ipset.HashIPPortNet:
		return layout{first: partAddr, port: true, second: partNet, revision: 8}, true
	case ipset.HashNet:
		return layout{first: partNet, revision: 7}, true
	case ipset.HashNetPort:
		return layout{first: partNet, port: true, revision: 8}, true
	case ipset.BitmapPort:
		return layout{revision: 3}, true
	}
	return layout{}, false
}

// entry makes the set's entry of what a request sent, refusing what the
// type's uadt function refuses.
func (s *set) entry(r rawEntry) (ipset.Entry, unix.Errno) {
	var e ipset.Entry
	if s.header.Type == ipset.BitmapPort {
		if !r.hasPort {
			return e, errProtocol
		}
		if r.port < s.header.PortFrom || r.port > s.header.PortTo {
			return e, errBitmapRange
		}
		e.Port = r.port
		return e, s.extensions(&e, r)
	}
	l, _ := layoutOf(s.header.Type)
	var errno unix.Errno
	if e.Addr, e.Net, errno = s.place(l.first, r.ip, r.cidr); errno != 0 {
		return e, errno
	}
	if l.port {
		if errno = portOf(&e, r); errno != 0 {
			return e, errno
		}
	}
	if e.Addr2, e.Net2, errno = s.place(l.second, r.ip2, r.cidr2); errno != 0 {
		return e, errno
	}
	return e, s.extensions(&e, r)
}

// place reads an address or network of the set's family; the kernel
// stores a network masked, and without a prefix length takes a host.
func (s *set) place(p part, a netip.Addr, cidr int) (netip.Addr, netip.Prefix, unix.Errno) {
	if p == partNone {
		return netip.Addr{}, netip.Prefix{}, 0
	}
	if !a.IsValid() || a.Is4() != (s.header.Family == inet.IPv4) {
		return netip.Addr{}, netip.Prefix{}, errProtocol
	}
	if p == partAddr {
		return a, netip.Prefix{}, 0
	}
	if cidr < 0 {
		cidr = a.BitLen()
	}
	if cidr == 0 || cidr > a.BitLen() {
		return netip.Addr{}, netip.Prefix{}, errInvalidCIDR
	}
	return netip.Addr{}, netip.PrefixFrom(a, cidr).Masked(), 0
}

// portOf reads the protocol and port: the protocol is required, and one
// without ports keeps port 0.
func portOf(e *ipset.Entry, r rawEntry) unix.Errno {
	if !r.hasPort {
		return errProtocol
	}
	if !r.hasProto {
		return errMissingProto
	}
	if r.proto == 0 {
		return errInvalidProto
	}
	e.Protocol = inet.Protocol(r.proto)
	switch e.Protocol {
	case inet.TCP, inet.UDP, inet.SCTP, inet.UDPLite:
		e.Port = r.port
	}
	return 0
}

// extensions sets the timeout, counters and comment the set keeps, and
// refuses those it was created without.
func (s *set) extensions(e *ipset.Entry, r rawEntry) unix.Errno {
	h := s.header
	switch {
	case r.hasTimeout && h.Timeout == 0:
		return errTimeout
	case r.hasCounters && !h.Counters:
		return errCounter
	case r.comment != "" && !h.Comment:
		return errComment
	}
	switch {
	case h.Timeout == 0:
	case !r.hasTimeout:
		e.Timeout = h.Timeout
	case r.timeout == 0:
		e.Timeout = ipset.Permanent
	default:
		e.Timeout = time.Duration(r.timeout) * time.Second
	}
	if h.Counters {
		e.Counters = &ipset.Counters{Packets: r.packets, Bytes: r.bytes}
	}
	e.Comment = r.comment
	return 0
}

// entryKey is an entry's key: everything but the extensions. Two
// entries with one key are the same entry.
type entryKey struct {
	addr     netip.Addr
	net      netip.Prefix
	protocol inet.Protocol
	port     uint16
	addr2    netip.Addr
	net2     netip.Prefix
}

func keyOf(e ipset.Entry) entryKey {
	return entryKey{addr: e.Addr, net: e.Net, protocol: e.Protocol, port: e.Port, addr2: e.Addr2, net2: e.Net2}
}

// matches is the kernel's test: a host network tested against a hash of
// networks matches every stored network holding the address.
func matches(stored, probe ipset.Entry) bool {
	in := func(s, p netip.Prefix) bool {
		if p.IsValid() && p.IsSingleIP() {
			return s.Contains(p.Addr())
		}
		return s == p
	}
	return stored.Addr == probe.Addr && in(stored.Net, probe.Net) && stored.Protocol == probe.Protocol &&
		stored.Port == probe.Port && stored.Addr2 == probe.Addr2 && in(stored.Net2, probe.Net2)
}

// adt applies add, del or test of one entry. exist is ipset's -exist:
// IPSET_ERR_EXIST is then no error, and add updates the extensions.
func (s *set) adt(cmd uint8, e ipset.Entry, exist bool) unix.Errno {
	k := keyOf(e)
	i, found := s.at[k]
	switch {
	case cmd == cmdTest && (found || probesNets(e) && slices.ContainsFunc(s.list(), func(x ipset.Entry) bool { return matches(x, e) })):
		return 0
	case cmd == cmdTest:
		return errExist
	case cmd == cmdDel && !found:
		return existErr(exist)
	case cmd == cmdDel:
		delete(s.at, k)
		s.holes++
	case found && !exist:
		return errExist
	case found:
		s.entries[i] = e
	case s.header.Type != ipset.BitmapPort && uint32(len(s.at)) >= s.header.MaxElem:
		return errHashFull
	default:
		s.at[k] = len(s.entries)
		s.entries = append(s.entries, e)
	}
	return 0
}

// probesNets says whether a test of e may match a stored entry of
// another key: a host address tested against networks (see matches).
func probesNets(e ipset.Entry) bool {
	host := func(p netip.Prefix) bool { return p.IsValid() && p.IsSingleIP() }
	return host(e.Net) || host(e.Net2)
}

func existErr(exist bool) unix.Errno {
	if exist {
		return 0
	}
	return errExist
}
