package inet

import (
	"net/netip"
	"testing"
)

func TestProtocolNamesRoundTrip(t *testing.T) {
	for _, n := range protocolNames {
		for _, s := range []string{n.name, n.p.String()} {
			if p, err := ParseProtocol(s); err != nil || p != n.p {
				t.Errorf("ParseProtocol(%q) = %v, %v; want %v", s, p, err, n.p)
			}
		}
	}
	if got := Protocol(99).String(); got != "proto(99)" {
		t.Errorf("Protocol(99) = %q", got)
	}
	if _, err := ParseProtocol("tcp6"); err == nil {
		t.Error("ParseProtocol(tcp6) did not fail")
	}
}

func TestFamilyOf(t *testing.T) {
	for _, c := range []struct {
		addr netip.Addr
		want Family
		bits int
	}{
		{netip.MustParseAddr("10.0.0.1"), IPv4, 32},
		{netip.MustParseAddr("::ffff:10.0.0.1"), IPv6, 128},
		{netip.Addr{}, 0, 32},
	} {
		if f := FamilyOf(c.addr); f != c.want || f.Bits() != c.bits {
			t.Errorf("FamilyOf(%v) = %v (%d bits); want %v (%d bits)", c.addr, f, f.Bits(), c.want, c.bits)
		}
	}
}

func TestPerFamily(t *testing.T) {
	var p PerFamily[int]
	for i, f := range Families() {
		*p.Of(f) = i + 1
	}
	if p != (PerFamily[int]{1, 2}) {
		t.Errorf("PerFamily filled in Families' order = %v; want [1 2]", p)
	}
	for _, c := range []struct {
		f    Family
		want int
	}{{IPv4, 1}, {IPv6, 2}, {0, 1}} {
		if got := p.Get(c.f); got != c.want || *p.Of(c.f) != c.want {
			t.Errorf("Get(%v) = %d, *Of = %d; want %d", c.f, got, *p.Of(c.f), c.want)
		}
	}
}

func TestVirtualServer(t *testing.T) {
	for _, c := range []struct {
		p    Protocol
		addr netip.Addr
		port uint16
		want string
	}{
		{TCP, netip.MustParseAddr("10.96.0.1"), 80, "TCP 10.96.0.1:80"},
		{UDP, netip.MustParseAddr("fd00::a"), 53, "UDP [fd00::a]:53"},
		{SCTP, netip.Addr{}, 30080, "SCTP *:30080"},
		{Protocol(99), netip.MustParseAddr("10.0.0.1"), 1, "PROTO(99) 10.0.0.1:1"},
	} {
		if got := VirtualServer(c.p, c.addr, c.port); got != c.want {
			t.Errorf("VirtualServer(%v, %v, %d) = %q, want %q", c.p, c.addr, c.port, got, c.want)
		}
		if got := string(AppendVirtualServer([]byte("x "), c.p, c.addr, c.port)); got != "x "+c.want {
			t.Errorf("AppendVirtualServer after a prefix = %q", got)
		}
	}
}
