package conntrack

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Family is an address family of conntrack entries.
type Family uint8

// The address families conntrack tracks.
const (
	IPv4 Family = 2  // AF_INET
	IPv6 Family = 10 // AF_INET6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	case 0:
		return "any"
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

// familyOf returns the family of an address, 0 for the zero Addr.
func familyOf(a netip.Addr) Family {
	switch {
	case a.Is4():
		return IPv4
	case a.Is6():
		return IPv6
	}
	return 0
}

// Protocol is an IP protocol number.
type Protocol uint8

// Protocols that conntrack tracks by port or ICMP identifier.
const (
	ICMP    Protocol = 1   // IPPROTO_ICMP
	TCP     Protocol = 6   // IPPROTO_TCP
	UDP     Protocol = 17  // IPPROTO_UDP
	DCCP    Protocol = 33  // IPPROTO_DCCP
	ICMPv6  Protocol = 58  // IPPROTO_ICMPV6
	SCTP    Protocol = 132 // IPPROTO_SCTP
	UDPLite Protocol = 136 // IPPROTO_UDPLITE
)

func (p Protocol) String() string {
	switch p {
	case ICMP:
		return "icmp"
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case DCCP:
		return "dccp"
	case ICMPv6:
		return "icmpv6"
	case SCTP:
		return "sctp"
	case UDPLite:
		return "udplite"
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// hasPorts reports whether the kernel keys the protocol by ports.
func (p Protocol) hasPorts() bool {
	switch p {
	case TCP, UDP, DCCP, SCTP, UDPLite:
		return true
	}
	return false
}

// Tuple is one direction of a connection.
type Tuple struct {
	Src, Dst netip.Addr
	Protocol Protocol
	// SrcPort and DstPort are set for port-based protocols.
	SrcPort, DstPort uint16
	// ICMPID, ICMPType and ICMPCode are set for ICMP and ICMPv6.
	ICMPID   uint16
	ICMPType uint8
	ICMPCode uint8
}

// Reverse returns the tuple of the opposite direction without NAT, as the
// kernel would compute it for a reply; ICMP echo types are not swapped.
func (t Tuple) Reverse() Tuple {
	r := t
	r.Src, r.Dst = t.Dst, t.Src
	r.SrcPort, r.DstPort = t.DstPort, t.SrcPort
	return r
}

func (t Tuple) String() string {
	if t.Protocol.hasPorts() {
		return fmt.Sprintf("%s %s->%s", t.Protocol,
			netip.AddrPortFrom(t.Src, t.SrcPort), netip.AddrPortFrom(t.Dst, t.DstPort))
	}
	return fmt.Sprintf("%s %s->%s", t.Protocol, t.Src, t.Dst)
}

// Status is a set of IPS_* connection status bits.
type Status uint32

// Status bits (enum ip_conntrack_status).
const (
	StatusExpected     Status = 1 << 0
	StatusSeenReply    Status = 1 << 1
	StatusAssured      Status = 1 << 2
	StatusConfirmed    Status = 1 << 3
	StatusSrcNAT       Status = 1 << 4
	StatusDstNAT       Status = 1 << 5
	StatusSrcNATDone   Status = 1 << 7
	StatusDstNATDone   Status = 1 << 8
	StatusDying        Status = 1 << 9
	StatusFixedTimeout Status = 1 << 10
)

// Flow is one conntrack entry.
type Flow struct {
	// Orig is the tuple of the first packet; Reply the tuple replies are
	// expected to have, which differs from the reversed Orig under NAT.
	Orig, Reply Tuple
	Zone        uint16
	Mark        uint32
	// Timeout is the time left before the entry expires, in whole seconds.
	Timeout time.Duration
	Status  Status
	// ID identifies this incarnation of the entry; a delete that names it
	// leaves alone a newer entry with the same tuple.
	ID uint32
}

// Family returns the address family of the entry.
func (f Flow) Family() Family { return familyOf(f.Orig.Src) }

func (f Flow) String() string {
	return fmt.Sprintf("%s reply %s->%s", f.Orig,
		netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort), netip.AddrPortFrom(f.Reply.Dst, f.Reply.DstPort))
}
