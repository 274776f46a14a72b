package conntrack

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsplane/ipvsplane/inet"
)

// Filter selects conntrack entries: an entry matches when every field that
// is set matches. The kernel applies as much of it as it supports; this
// package checks the rest, so the result is the same on every kernel.
type Filter struct {
	// Family restricts to one address family; 0 means both, unless an
	// address below implies one.
	Family inet.Family
	// Protocol restricts to one protocol; 0 means any.
	Protocol inet.Protocol
	// Orig and Reply match fields of the original and reply tuples.
	Orig, Reply TupleFilter
	// MarkMask, when nonzero, selects entries whose mark&MarkMask equals
	// Mark&MarkMask.
	Mark, MarkMask uint32
	// Zone, when not nil, selects entries of that conntrack zone.
	Zone *uint16
	// KeepReplySources excludes entries whose reply source is one of these:
	// the endpoints a service still has. A zero port stands for any port.
	KeepReplySources []netip.AddrPort

	// all is set by All: a Filter with no field set selects nothing
	// unless it says so, so that a forgotten field cannot empty the table.
	all bool
}

// All selects every entry. It is the only Filter with no field set that
// the Conn's methods accept.
func All() Filter { return Filter{all: true} }

// selection returns f for the dump machinery, where nil means every entry.
func (f Filter) selection(op string) (*Filter, error) {
	empty := f.Family == 0 && f.Protocol == 0 && f.Orig.isZero() && f.Reply.isZero() &&
		f.MarkMask == 0 && f.Zone == nil && len(f.KeepReplySources) == 0
	switch {
	case empty && f.all:
		return nil, nil
	case empty:
		return nil, &OpError{Op: op, Object: "empty filter", sentinel: ErrFilterEmpty}
	}
	return &f, nil
}

// TupleFilter matches fields of a tuple; zero fields match anything. Ports
// are compared only when the Filter names a port-based protocol.
type TupleFilter struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

func (t TupleFilter) isZero() bool { return t == TupleFilter{} }

// ByDestination selects the entries of proto whose original destination is
// dst, and whose original destination port is port unless port is 0: the
// entries of a removed service IP (or IP and port).
func ByDestination(proto inet.Protocol, dst netip.Addr, port uint16) Filter {
	return Filter{Protocol: proto, Orig: TupleFilter{Dst: dst, DstPort: port}}
}

// ByDestinationPort selects the entries of proto in family whose original
// destination port is port, on any address: the entries of a NodePort.
// Family 0 means both families.
func ByDestinationPort(family inet.Family, proto inet.Protocol, port uint16) Filter {
	return Filter{Family: family, Protocol: proto, Orig: TupleFilter{DstPort: port}}
}

// ByEndpoint selects the entries of proto to service (any port when its
// port is 0) that NAT sent to endpoint (any port when its port is 0): the
// entries of a removed endpoint of a service.
func ByEndpoint(proto inet.Protocol, service, endpoint netip.AddrPort) Filter {
	return Filter{
		Protocol: proto,
		Orig:     TupleFilter{Dst: service.Addr(), DstPort: service.Port()},
		Reply:    TupleFilter{Src: endpoint.Addr(), SrcPort: endpoint.Port()},
	}
}

// ByStaleEndpoints selects the entries of proto to service (any port when
// its port is 0) whose reply source is none of keep: after a sync, the
// entries that still point at endpoints the service no longer has.
func ByStaleEndpoints(proto inet.Protocol, service netip.AddrPort, keep []netip.AddrPort) Filter {
	return Filter{
		Protocol:         proto,
		Orig:             TupleFilter{Dst: service.Addr(), DstPort: service.Port()},
		KeepReplySources: slices.Clone(keep),
	}
}

// describe names a selection, where nil is every entry.
func describe(f *Filter) string {
	if f == nil {
		return "all entries"
	}
	return f.String()
}

func (f Filter) String() string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	if f.Family != 0 {
		add("family %s", f.Family)
	}
	if f.Protocol != 0 {
		add("%s", f.Protocol)
	}
	for _, d := range []struct {
		name string
		t    TupleFilter
	}{{"orig", f.Orig}, {"reply", f.Reply}} {
		if d.t.Src.IsValid() {
			add("%s-src %s", d.name, d.t.Src)
		}
		if d.t.Dst.IsValid() {
			add("%s-dst %s", d.name, d.t.Dst)
		}
		if d.t.SrcPort != 0 {
			add("%s-sport %d", d.name, d.t.SrcPort)
		}
		if d.t.DstPort != 0 {
			add("%s-dport %d", d.name, d.t.DstPort)
		}
	}
	if f.MarkMask != 0 {
		add("mark %#x/%#x", f.Mark, f.MarkMask)
	}
	if f.Zone != nil {
		add("zone %d", *f.Zone)
	}
	if len(f.KeepReplySources) > 0 {
		add("reply-src not in %v", f.KeepReplySources)
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, " ")
	case f.all:
		return "all entries"
	}
	return "empty filter"
}

// validate rejects filters whose addresses contradict their family or each
// other: they could match nothing, which is most likely a caller's bug.
func (f *Filter) validate() error {
	fam := f.Family
	for _, a := range []netip.Addr{f.Orig.Src, f.Orig.Dst, f.Reply.Src, f.Reply.Dst} {
		af := inet.FamilyOf(a)
		if af == 0 {
			continue
		}
		if a.Is4In6() {
			return fmt.Errorf("filter %v: IPv4-mapped IPv6 address %s; use the IPv4 form", f, a)
		}
		if fam != 0 && af != fam {
			return fmt.Errorf("filter %v: address %s is not %s", f, a, fam)
		}
		fam = af
	}
	if fam != 0 && fam != inet.IPv4 && fam != inet.IPv6 {
		return fmt.Errorf("filter %v: unknown family", f)
	}
	return nil
}

// Match reports whether the entry is selected by the filter; a Filter with
// no field set selects every entry.
func (f Filter) Match(fl *Flow) bool {
	if f.Family != 0 && fl.Family() != f.Family {
		return false
	}
	if f.Protocol != 0 && fl.Orig.Protocol != f.Protocol {
		return false
	}
	ports := hasPorts(f.Protocol)
	if !f.Orig.match(&fl.Orig, ports) || !f.Reply.match(&fl.Reply, ports) {
		return false
	}
	if f.MarkMask != 0 && fl.Mark&f.MarkMask != f.Mark&f.MarkMask {
		return false
	}
	if f.Zone != nil && fl.Zone != *f.Zone {
		return false
	}
	for _, k := range f.KeepReplySources {
		if fl.Reply.Src == k.Addr() && (k.Port() == 0 || fl.Reply.SrcPort == k.Port()) {
			return false
		}
	}
	return true
}

func (t TupleFilter) match(tu *Tuple, ports bool) bool {
	if t.Src.IsValid() && tu.Src != t.Src {
		return false
	}
	if t.Dst.IsValid() && tu.Dst != t.Dst {
		return false
	}
	if ports && t.SrcPort != 0 && tu.SrcPort != t.SrcPort {
		return false
	}
	if ports && t.DstPort != 0 && tu.DstPort != t.DstPort {
		return false
	}
	return true
}
