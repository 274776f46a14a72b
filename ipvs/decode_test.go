package ipvs

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/mdlayher/netlink"
)

var (
	sampleStats = Stats{
		Connections: 1 << 33, PacketsIn: 7, PacketsOut: 6, BytesIn: 1 << 40, BytesOut: 5,
		CPS: 4, PacketsInPS: 3, PacketsOutPS: 2, BytesInPS: 1, BytesOutPS: 9,
	}
	sampleServices = []Service{
		{Family: inet.IPv4, Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "rr", Flags: Hashed, Netmask: 32},
		{Family: inet.IPv6, Protocol: inet.UDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 53, Scheduler: "wrr",
			Flags: Persistent | Hashed, Timeout: 300 * time.Second, Netmask: 64, Stats: sampleStats},
		{Family: inet.IPv4, FirewallMark: 7, Scheduler: "mh", Flags: MHFallback | MHPort | Hashed, Netmask: 32},
		{Family: inet.IPv4, Protocol: inet.SCTP, Addr: netip.MustParseAddr("10.0.0.3"), Port: 9, Scheduler: "sh",
			PersistenceEngine: "sip", Flags: Persistent | Hashed, Timeout: time.Minute, Netmask: 24},
	}
	sampleDestinations = []Destination{
		{Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080, Forward: Masquerade, Weight: 3,
			UpperThreshold: 100, LowerThreshold: 10, ActiveConnections: 5, InactiveConnections: 6,
			PersistentConnections: 7, Stats: sampleStats},
		{Addr: netip.MustParseAddr("2001:db8::5"), Port: 80, Forward: Tunnel, Weight: 1,
			TunnelType: GUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum | TunnelRemoteChecksum},
		{Addr: netip.MustParseAddr("10.1.0.3"), Forward: Route, Drained: true},
		{Addr: netip.MustParseAddr("127.0.0.1"), Port: 80, Forward: LocalNode, Drained: true},
	}
)

func TestDecodeService(t *testing.T) {
	for _, want := range sampleServices {
		t.Run(want.String(), func(t *testing.T) {
			got, err := decodeService(encodeServiceReply(want))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeDestination(t *testing.T) {
	for _, want := range sampleDestinations {
		t.Run(want.String(), func(t *testing.T) {
			got, err := decodeDestination(encodeDestinationReply(want), inet.IPv4)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// Kernels before 4.1 send only the 32-bit STATS nest; before 3.18, no
// destination family.
func TestDecodeOldKernel(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	aeAddr(ae, destAttrAddr, netip.MustParseAddr("2001:db8::7"))
	aePort(ae, destAttrPort, 443)
	ae.Nested(destAttrStats, func(nae *netlink.AttributeEncoder) error {
		encodeStatsReply(nae, Stats{Connections: 12, BytesIn: 1 << 35}, false)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeDestination(b, inet.IPv6)
	if err != nil {
		t.Fatal(err)
	}
	want := Destination{Addr: netip.MustParseAddr("2001:db8::7"), Port: 443, Stats: Stats{Connections: 12, BytesIn: 1 << 35}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	attrs := func(fn func(ae *netlink.AttributeEncoder)) []byte {
		ae := netlink.NewAttributeEncoder()
		fn(ae)
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		fn   func() error
	}{
		{"service without family", func() error {
			_, err := decodeService(attrs(func(ae *netlink.AttributeEncoder) { ae.Uint32(svcAttrFwmark, 1) }))
			return err
		}},
		{"service with short port", func() error {
			_, err := decodeService(attrs(func(ae *netlink.AttributeEncoder) {
				ae.Uint16(svcAttrAF, uint16(inet.IPv4))
				ae.Uint8(svcAttrPort, 1)
			}))
			return err
		}},
		{"service with short address", func() error {
			_, err := decodeService(attrs(func(ae *netlink.AttributeEncoder) {
				ae.Uint16(svcAttrAF, uint16(inet.IPv6))
				ae.Bytes(svcAttrAddr, make([]byte, 4))
			}))
			return err
		}},
		{"service with long scheduler", func() error {
			_, err := decodeService(attrs(func(ae *netlink.AttributeEncoder) {
				ae.Uint16(svcAttrAF, uint16(inet.IPv4))
				ae.String(svcAttrSchedName, "a-very-long-scheduler")
			}))
			return err
		}},
		{"destination without address", func() error {
			_, err := decodeDestination(attrs(func(ae *netlink.AttributeEncoder) { aePort(ae, destAttrPort, 1) }), inet.IPv4)
			return err
		}},
		{"stats counter of 3 bytes", func() error {
			_, err := decodeStats(attrs(func(ae *netlink.AttributeEncoder) { ae.Bytes(statsAttrConns, []byte{1, 2, 3}) }))
			return err
		}},
		{"truncated attributes", func() error {
			_, err := decodeTimeouts([]byte{8, 0, 4})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); err == nil {
				t.Fatal("decoded without error")
			}
		})
	}
}

func TestDecodeTimeoutsInfo(t *testing.T) {
	want := Timeouts{TCP: 900 * time.Second, TCPFin: 2 * time.Minute, UDP: 5 * time.Minute}
	if got, err := decodeTimeouts(encodeTimeoutsReply(want)); err != nil || got != want {
		t.Fatalf("timeouts: got %+v, %v; want %+v", got, err, want)
	}
	wantInfo := Info{Version: Version{1, 2, 1}, ConnTableSize: 4096}
	if got, err := decodeInfo(encodeInfoReply(wantInfo)); err != nil || got != wantInfo {
		t.Fatalf("info: got %+v, %v; want %+v", got, err, wantInfo)
	}
	if s := wantInfo.Version.String(); s != "1.2.1" {
		t.Fatalf("version %q", s)
	}
}

func TestNetmask(t *testing.T) {
	tests := []struct {
		family inet.Family
		ones   int
		want   []byte
		back   int
	}{
		{inet.IPv4, 0, []byte{255, 255, 255, 255}, 32},
		{inet.IPv4, 24, []byte{255, 255, 255, 0}, 24},
		{inet.IPv4, 1, []byte{128, 0, 0, 0}, 1},
		{inet.IPv6, 0, netmaskBytes(inet.IPv6, 128), 128},
		{inet.IPv6, 64, netmaskBytes(inet.IPv6, 64), 64},
	}
	for _, tt := range tests {
		b := netmaskBytes(tt.family, tt.ones)
		if !reflect.DeepEqual(b, tt.want) {
			t.Errorf("%v /%d: %x, want %x", tt.family, tt.ones, b, tt.want)
		}
		if back, err := decodeNetmask(tt.family, b); err != nil || back != tt.back {
			t.Errorf("%v /%d: decoded /%d, %v", tt.family, tt.ones, back, err)
		}
	}
}

// The 64-bit STATS64 nest wins over the clipped 32-bit STATS, whichever
// comes first: a busy virtual server's counters pass 2^32 within hours.
func TestDecodeStats64Preferred(t *testing.T) {
	full := Stats{Connections: 1<<32 + 5, PacketsIn: 1<<33 + 1, PacketsOut: 3, BytesIn: 1 << 40, BytesOut: 9}
	for _, stats64First := range []bool{true, false} {
		ae := netlink.NewAttributeEncoder()
		ae.Uint16(svcAttrAF, uint16(inet.IPv4))
		nests := []func(){
			func() {
				ae.Nested(svcAttrStats, func(nae *netlink.AttributeEncoder) error {
					encodeStatsReply(nae, full, false)
					return nil
				})
			},
			func() {
				ae.Nested(svcAttrStats64, func(nae *netlink.AttributeEncoder) error {
					encodeStatsReply(nae, full, true)
					return nil
				})
			},
		}
		if stats64First {
			nests[0], nests[1] = nests[1], nests[0]
		}
		for _, n := range nests {
			n()
		}
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodeService(b)
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats != full {
			t.Errorf("STATS64 first %v: got %+v, want %+v", stats64First, s.Stats, full)
		}
	}
}
