package ipset

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

func parseProtocol(s string) (inet.Protocol, error) {
	for _, p := range []inet.Protocol{inet.TCP, inet.UDP, inet.SCTP, inet.UDPLite} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown protocol %q", s)
}

// Permanent is the Timeout of an entry that never expires in a set with
// timeouts ("timeout 0" in ipset syntax). A zero Timeout means the set's
// default.
const Permanent time.Duration = -1

// Counters are an entry's packet and byte counters, in sets created with
// counters.
type Counters struct {
	Packets, Bytes uint64
}

// Entry is a member of a set. Which fields are used depends on the set type:
//
//	hash:ip           Addr
//	hash:ip,port      Addr, Protocol, Port
//	hash:ip,port,ip   Addr, Protocol, Port, Addr2
//	hash:ip,port,net  Addr, Protocol, Port, Net2
//	hash:net          Net
//	hash:net,port     Net, Protocol, Port
//	bitmap:port       Port
type Entry struct {
	Addr     netip.Addr
	Net      netip.Prefix
	Protocol inet.Protocol
	Port     uint16
	Addr2    netip.Addr
	Net2     netip.Prefix
	// Timeout is the entry's lifetime in whole seconds; see Permanent.
	Timeout time.Duration
	// Comment needs a set created with comments.
	Comment string
	// Counters, when not nil, are the entry's counters (read back from a
	// set with counters, or their starting values on add).
	Counters *Counters
}

// key is what identifies an entry in its set: everything but the
// extensions. It holds no pointers, so maps hash it as plain memory.
type key struct {
	addr, addr2 [16]byte
	// bits and bits2 are a network's prefix length plus one, 0 for a
	// plain address.
	bits, bits2 uint8
	v4          bool
	proto       inet.Protocol
	port        uint16
}

// key takes a pointer: Diff computes it for every entry of two lists, and
// an Entry is large to copy.
func (e *Entry) key() key {
	k := key{proto: e.Protocol, port: e.Port}
	switch {
	case e.Addr.IsValid():
		k.addr, k.v4 = e.Addr.As16(), e.Addr.Is4()
	case e.Net.IsValid():
		k.addr, k.bits, k.v4 = prefixKey(e.Net)
	}
	switch {
	case e.Addr2.IsValid():
		k.addr2 = e.Addr2.As16()
	case e.Net2.IsValid():
		k.addr2, k.bits2, _ = prefixKey(e.Net2)
	}
	return k
}

func prefixKey(p netip.Prefix) ([16]byte, uint8, bool) {
	return p.Masked().Addr().As16(), uint8(p.Bits() + 1), p.Addr().Is4()
}

// check reports what is wrong with e as a member of a set of type t.
func (e Entry) check(t Type) error {
	l, ok := t.layout()
	if !ok {
		return typeError(t)
	}
	return e.checkLayout(t, l)
}

func (e Entry) checkLayout(t Type, l layout) error {
	if err := checkPart(l.first, "address", e.Addr, e.Net); err != nil {
		return err
	}
	if err := checkPart(l.second, "second address", e.Addr2, e.Net2); err != nil {
		return err
	}
	fam := e.Addr
	if l.first == partNet {
		fam = e.Net.Addr()
	}
	if l.second != partNone {
		second := e.Addr2
		if l.second == partNet {
			second = e.Net2.Addr()
		}
		if second.Is4() != fam.Is4() {
			return fmt.Errorf("entry mixes IPv4 and IPv6 addresses")
		}
	}
	if l.port && e.Protocol == 0 {
		return fmt.Errorf("entry needs a protocol with its port")
	}
	if !l.port && !l.bitmap && (e.Protocol != 0 || e.Port != 0) {
		return fmt.Errorf("%s entry has no port", t)
	}
	if l.bitmap && e.Protocol != 0 {
		return fmt.Errorf("%s entry has no protocol", t)
	}
	if e.Timeout != Permanent && (e.Timeout < 0 || e.Timeout%time.Second != 0) {
		return fmt.Errorf("entry timeout %v is not a whole number of seconds", e.Timeout)
	}
	if len(e.Comment) > maxCommentSize || strings.ContainsAny(e.Comment, "\"\x00") {
		return fmt.Errorf("entry comment must have at most %d bytes and no quote or NUL", maxCommentSize)
	}
	return nil
}

// checkFamily reports an entry whose addresses are not of the set's family,
// which the kernel would reject as a protocol error.
func (e Entry) checkFamily(f inet.Family) error {
	for _, a := range []netip.Addr{e.Addr, e.Net.Addr(), e.Addr2, e.Net2.Addr()} {
		if a.IsValid() && (f == inet.IPv4) != a.Is4() {
			return fmt.Errorf("entry address %s is not of the set's family %s", a, f)
		}
	}
	return nil
}

func checkPart(p part, what string, a netip.Addr, n netip.Prefix) error {
	switch p {
	case partNone:
		if a.IsValid() || n.IsValid() {
			return fmt.Errorf("entry has a %s where its type has none", what)
		}
	case partAddr:
		if !a.IsValid() || a.Zone() != "" || n.IsValid() {
			return fmt.Errorf("entry needs a plain %s (netip.Addr) and no network", what)
		}
	case partNet:
		if !n.IsValid() || a.IsValid() {
			return fmt.Errorf("entry needs a %s as a network (netip.Prefix)", what)
		}
	}
	return nil
}

// String prints e in the syntax of `ipset save`, e.g. "10.0.0.2,tcp:8080,
// 10.0.0.2" followed by its extensions ("timeout 30 comment "x"").
func (e Entry) String() string {
	var b strings.Builder
	switch {
	case e.Addr.IsValid():
		b.WriteString(e.Addr.String())
	case e.Net.IsValid():
		b.WriteString(formatNet(e.Net))
	}
	if e.Protocol != 0 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", e.Protocol, e.Port)
	} else if !e.Addr.IsValid() && !e.Net.IsValid() {
		b.WriteString(strconv.Itoa(int(e.Port)))
	}
	switch {
	case e.Addr2.IsValid():
		b.WriteString("," + e.Addr2.String())
	case e.Net2.IsValid():
		b.WriteString("," + formatNet(e.Net2))
	}
	switch {
	case e.Timeout == Permanent:
		b.WriteString(" timeout 0")
	case e.Timeout > 0:
		fmt.Fprintf(&b, " timeout %d", e.Timeout/time.Second)
	}
	if e.Counters != nil {
		fmt.Fprintf(&b, " packets %d bytes %d", e.Counters.Packets, e.Counters.Bytes)
	}
	if e.Comment != "" {
		// ipset(8) prints comments raw between quotes; check forbids quotes.
		b.WriteString(` comment "` + e.Comment + `"`)
	}
	return b.String()
}

// formatNet leaves out a full-length prefix, as ipset(8) does.
func formatNet(p netip.Prefix) string {
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}
