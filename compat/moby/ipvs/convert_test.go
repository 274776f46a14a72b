package ipvs_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"reflect"
	"syscall"
	"testing"

	"github.com/ipvsplane/ipvsplane/compat/moby/ipvs"
	"github.com/ipvsplane/ipvsplane/inet"
	ipvsplane "github.com/ipvsplane/ipvsplane/ipvs"
)

func TestToService(t *testing.T) {
	raw := func(b ...byte) uint32 { return binary.NativeEndian.Uint32(b) }
	for _, c := range []struct {
		name string
		in   ipvs.Service
		want ipvsplane.Service
		bad  bool
	}{
		{name: "mapped IPv4 address, full mask",
			in:   ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: 6, Address: net.ParseIP("10.0.0.1"), Port: 80, Netmask: 0xffffffff},
			want: ipvsplane.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Netmask: 32}},
		{name: "nil address is the unspecified one",
			in:   ipvs.Service{AddressFamily: syscall.AF_INET6, Protocol: 17, Port: 53, Netmask: 128},
			want: ipvsplane.Service{Family: inet.IPv6, Protocol: inet.UDP, Addr: netip.IPv6Unspecified(), Port: 53, Netmask: 128}},
		{name: "fwmark ignores the address fields",
			in:   ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 3, Protocol: 6, Address: net.ParseIP("10.0.0.1"), Netmask: raw(255, 255, 0, 0)},
			want: ipvsplane.Service{Family: inet.IPv4, FirewallMark: 3, Netmask: 16}},
		{name: "unknown family", in: ipvs.Service{AddressFamily: 0, FWMark: 3}, bad: true},
		{name: "mask not a prefix", in: ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 3, Netmask: raw(255, 0, 255, 0)}, bad: true},
		{name: "IPv6 prefix too long", in: ipvs.Service{AddressFamily: syscall.AF_INET6, FWMark: 3, Netmask: 129}, bad: true},
		{name: "protocol out of range", in: ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: 300, Address: net.ParseIP("10.0.0.1")}, bad: true},
		{name: "short address", in: ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: 6, Address: net.IP{10, 0, 0}}, bad: true},
	} {
		got, err := ipvs.ToService(&c.in)
		if (err != nil) != c.bad || (!c.bad && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", c.name, got, err, c.want, c.bad)
		}
	}
	if _, err := ipvs.ToService(nil); err == nil {
		t.Error("nil service converted")
	}
}

// A service read back converts to what moby/ipvs returned, and back to
// what was read.
func TestFromServiceRoundTrip(t *testing.T) {
	for _, s := range []ipvsplane.Service{
		{Family: inet.IPv4, Protocol: inet.SCTP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 9, Scheduler: "lc", Netmask: 24},
		{Family: inet.IPv4, FirewallMark: 5, Scheduler: "rr", Netmask: 0},
		{Family: inet.IPv6, Protocol: inet.TCP, Addr: netip.MustParseAddr("fd00::1"), Port: 443, Netmask: 128, PersistenceEngine: "sip"},
	} {
		m := ipvs.FromService(s)
		if s.FirewallMark != 0 && m.Address != nil {
			t.Errorf("%v: address %v", s, m.Address)
		}
		back, err := ipvs.ToService(m)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("%v: round trip %+v, %v", s, back, err)
		}
	}
}

func TestDestinationConversions(t *testing.T) {
	for _, c := range []struct {
		in   ipvs.Destination
		want ipvsplane.Destination
	}{
		{ipvs.Destination{Address: net.ParseIP("10.0.0.1"), Port: 80, Weight: 0, AddressFamily: syscall.AF_INET6},
			ipvsplane.Destination{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Drained: true}},
		{ipvs.Destination{Address: net.ParseIP("fd00::1"), Weight: 3, ConnectionFlags: ipvs.ConnectionFlagLocalNode | 0x100},
			ipvsplane.Destination{Addr: netip.MustParseAddr("fd00::1"), Weight: 3, Forward: ipvsplane.Masquerade}},
		{ipvs.Destination{Address: net.ParseIP("10.0.0.2"), Weight: -1, ConnectionFlags: ipvs.ConnFwdBypass},
			ipvsplane.Destination{Addr: netip.MustParseAddr("10.0.0.2"), Weight: -1, Forward: ipvsplane.Bypass}},
	} {
		got, err := ipvs.ToDestination(&c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ToDestination(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	if _, err := ipvs.ToDestination(&ipvs.Destination{}); err == nil {
		t.Error("destination without an address converted")
	}

	read := ipvsplane.Destination{Addr: netip.MustParseAddr("fd00::2"), Port: 8080, Weight: 2, Forward: ipvsplane.LocalNode,
		ActiveConnections: 4, InactiveConnections: 5,
		Stats: ipvsplane.Stats{Connections: 1<<32 + 7, BytesIn: 1 << 40, BytesOutPS: 1<<33 + 1}}
	want := &ipvs.Destination{Address: net.ParseIP("fd00::2"), Port: 8080, Weight: 2, ConnectionFlags: ipvs.ConnectionFlagLocalNode,
		AddressFamily: syscall.AF_INET6, ActiveConnections: 4, InactiveConnections: 5,
		Stats: ipvs.DstStats{Connections: 7, BytesIn: 1 << 40, BPSOut: 1}}
	if got := ipvs.FromDestination(read); !reflect.DeepEqual(got, want) {
		t.Errorf("FromDestination:\n got %+v\nwant %+v", got, want)
	}
}
