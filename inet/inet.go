package inet

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Family is an address family, numbered as the kernel's AF_* (and
// NFPROTO_*) values. Netlink attributes carry it 8 or 16 bits wide; the
// encoders widen it.
type Family uint8

// Address families. The zero Family is unspecified: both, or none.
const (
	IPv4 Family = 2  // AF_INET
	IPv6 Family = 10 // AF_INET6
)

// String returns "IPv4" or "IPv6", as Kubernetes spells them.
func (f Family) String() string {
	switch f {
	case 0:
		return "unspec"
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

// Bits returns the length of the family's addresses in bits: 128 for IPv6,
// 32 otherwise.
func (f Family) Bits() int {
	if f == IPv6 {
		return 128
	}
	return 32
}

// FamilyOf returns the family of an address, 0 for the zero Addr. An
// IPv4-mapped IPv6 address is IPv6.
func FamilyOf(a netip.Addr) Family {
	switch {
	case a.Is4():
		return IPv4
	case a.Is6():
		return IPv6
	}
	return 0
}

// Protocol is an IP protocol, numbered as the kernel's IPPROTO_* values:
// what IPVS, ipset and conntrack carry in their netlink attributes.
type Protocol uint8

// IP protocols the kernel packages name. Services carry TCP, UDP and SCTP.
const (
	ICMP    Protocol = 1   // IPPROTO_ICMP
	TCP     Protocol = 6   // IPPROTO_TCP
	UDP     Protocol = 17  // IPPROTO_UDP
	DCCP    Protocol = 33  // IPPROTO_DCCP
	ICMPv6  Protocol = 58  // IPPROTO_ICMPV6
	SCTP    Protocol = 132 // IPPROTO_SCTP
	UDPLite Protocol = 136 // IPPROTO_UDPLITE
)

var protocolNames = [...]struct {
	p    Protocol
	name string
}{{ICMP, "icmp"}, {TCP, "tcp"}, {UDP, "udp"}, {DCCP, "dccp"}, {ICMPv6, "icmpv6"}, {SCTP, "sctp"}, {UDPLite, "udplite"}}

// String returns the protocol's name in lower case, as ipset, conntrack
// and /etc/protocols spell it ("tcp"), or "proto(N)" for one without a
// name here.
func (p Protocol) String() string {
	for _, n := range protocolNames {
		if n.p == p {
			return n.name
		}
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// ParseProtocol returns the protocol String names ("tcp"; "TCP" too, as
// Kubernetes spells it).
func ParseProtocol(s string) (Protocol, error) {
	for _, n := range protocolNames {
		if strings.EqualFold(s, n.name) {
			return n.p, nil
		}
	}
	return 0, fmt.Errorf("inet: unknown protocol %q", s)
}

// AppendVirtualServer appends the name of a virtual server, the one text
// every layer gives it (errors, logs, Events, `ipvsplane status`, the
// state file): the protocol as Kubernetes and ipvsadm spell it, then the
// address and port, "TCP 10.96.0.1:80" or "UDP [fd00::a]:53". An invalid
// addr stands for a node port on every address of the node:
// "TCP *:30080".
func AppendVirtualServer(b []byte, p Protocol, addr netip.Addr, port uint16) []byte {
	start := len(b)
	b = append(b, p.String()...)
	for i := start; i < len(b); i++ {
		if 'a' <= b[i] && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	b = append(b, ' ')
	switch {
	case !addr.IsValid():
		b = append(b, '*')
	case addr.Is6():
		b = append(addr.AppendTo(append(b, '[')), ']')
	default:
		b = addr.AppendTo(b)
	}
	return strconv.AppendUint(append(b, ':'), uint64(port), 10)
}

// VirtualServer returns AppendVirtualServer's name of a virtual server.
func VirtualServer(p Protocol, addr netip.Addr, port uint16) string {
	return string(AppendVirtualServer(make([]byte, 0, 32), p, addr, port))
}

// Families returns the address families, IPv4 first: the order PerFamily
// keeps them in.
func Families() [2]Family { return [2]Family{IPv4, IPv6} }

// PerFamily holds a value for each address family, as dual-stack code
// keeps one apiece: a set, a table, a count. Its zero value holds T's
// zero value for both; it compares with == when T does.
type PerFamily[T any] [2]T

// Of returns a pointer to the value of family f, to read or change in
// place. Any family but IPv6 is IPv4's, as Bits counts it.
func (p *PerFamily[T]) Of(f Family) *T { return &p[f.index()] }

// Get returns the value of family f, also from a PerFamily that is not
// addressable (a map's value, a function's result).
func (p PerFamily[T]) Get(f Family) T { return p[f.index()] }

// index is f's place in a PerFamily: 1 for IPv6, 0 for any other.
func (f Family) index() int {
	if f == IPv6 {
		return 1
	}
	return 0
}
