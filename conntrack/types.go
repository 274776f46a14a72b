package conntrack

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

// hasPorts reports whether the kernel keys a protocol by ports.
func hasPorts(p inet.Protocol) bool {
	switch p {
	case inet.TCP, inet.UDP, inet.DCCP, inet.SCTP, inet.UDPLite:
		return true
	}
	return false
}

// Tuple is one direction of a connection.
type Tuple struct {
	Src, Dst netip.Addr
	Protocol inet.Protocol
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
	if hasPorts(t.Protocol) {
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
func (f Flow) Family() inet.Family { return inet.FamilyOf(f.Orig.Src) }

func (f Flow) String() string {
	return fmt.Sprintf("%s reply %s->%s", f.Orig,
		netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort), netip.AddrPortFrom(f.Reply.Dst, f.Reply.DstPort))
}
