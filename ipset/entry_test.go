package ipset

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

func TestParseEntryRoundTrip(t *testing.T) {
	tests := []struct {
		typ  Type
		in   string
		want Entry
		out  string // printed form when it differs from in
	}{
		{HashIP, "10.0.0.1", Entry{Addr: netip.MustParseAddr("10.0.0.1")}, ""},
		{HashIP, "fd00::5", Entry{Addr: netip.MustParseAddr("fd00::5")}, ""},
		{HashIPPort, "10.96.0.1,tcp:80", ipPort("10.96.0.1", inet.TCP, 80), ""},
		{HashIPPort, "fd00::1,udplite:5", ipPort("fd00::1", inet.UDPLite, 5), ""},
		{HashIPPortIP, "10.0.0.2,tcp:8080,10.0.0.2", Entry{Addr: netip.MustParseAddr("10.0.0.2"), Protocol: inet.TCP, Port: 8080, Addr2: netip.MustParseAddr("10.0.0.2")}, ""},
		{HashIPPortNet, "1.2.3.4,tcp:443,10.0.0.0/8", Entry{Addr: netip.MustParseAddr("1.2.3.4"), Protocol: inet.TCP, Port: 443, Net2: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{HashIPPortNet, "fd00::1,udp:53,fd00::/64", Entry{Addr: netip.MustParseAddr("fd00::1"), Protocol: inet.UDP, Port: 53, Net2: netip.MustParsePrefix("fd00::/64")}, ""},
		{HashNet, "10.0.0.0/8", Entry{Net: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{HashNet, "10.0.0.1/32", Entry{Net: netip.MustParsePrefix("10.0.0.1/32")}, "10.0.0.1"},
		{HashNet, "10.0.0.1", Entry{Net: netip.MustParsePrefix("10.0.0.1/32")}, ""},
		{HashNetPort, "10.1.0.0/16,sctp:9", Entry{Net: netip.MustParsePrefix("10.1.0.0/16"), Protocol: inet.SCTP, Port: 9}, ""},
		{BitmapPort, "80", Entry{Port: 80}, ""},
		{BitmapPort, "tcp:81", Entry{Port: 81}, "81"},
		{HashIP, `1.1.1.1 timeout 30 comment "a b"`, Entry{Addr: netip.MustParseAddr("1.1.1.1"), Timeout: 30 * time.Second, Comment: "a b"}, ""},
		{HashIP, "1.1.1.1 timeout 0", Entry{Addr: netip.MustParseAddr("1.1.1.1"), Timeout: Permanent}, ""},
		{BitmapPort, "80 timeout 99 packets 3 bytes 120", Entry{Port: 80, Timeout: 99 * time.Second, Counters: &Counters{Packets: 3, Bytes: 120}}, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ)+" "+tt.in, func(t *testing.T) {
			got, err := ParseEntry(tt.typ, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseEntry = %#v, want %#v", got, tt.want)
			}
			out := tt.out
			if out == "" {
				out = tt.in
			}
			if s := got.String(); s != out {
				t.Errorf("String = %q, want %q", s, out)
			}
			again, err := ParseEntry(tt.typ, got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("reparse = %#v, %v", again, err)
			}
		})
	}
}

func TestParseEntryErrors(t *testing.T) {
	tests := []struct {
		typ Type
		in  string
	}{
		{HashIP, ""},
		{HashIP, "10.0.0.1,tcp:80"},
		{HashIP, "10.0.0.0/8"},
		{HashIPPort, "10.0.0.1"},
		{HashIPPort, "10.0.0.1,80"},
		{HashIPPort, "10.0.0.1,gre:0"},
		{HashIPPort, "10.0.0.1,tcp:65536"},
		{HashIPPortIP, "10.0.0.1,tcp:80,fd00::1"},
		{HashNet, "10.0.0.0/33"},
		{BitmapPort, "10.0.0.1"},
		{HashIP, "1.1.1.1 timeout"},
		{HashIP, "1.1.1.1 bogus 1"},
		{HashIP, `1.1.1.1 comment "open`},
		{"list:set", "a"},
	}
	for _, tt := range tests {
		if e, err := ParseEntry(tt.typ, tt.in); err == nil {
			t.Errorf("ParseEntry(%s, %q) = %v, want an error", tt.typ, tt.in, e)
		}
	}
	if _, err := ParseEntry("list:set", "a"); !errors.Is(err, ErrTypeNotSupported) {
		t.Errorf("unknown type: %v, want ErrTypeNotSupported", err)
	}
}

func TestEntryCheck(t *testing.T) {
	tests := []struct {
		typ Type
		e   Entry
		ok  bool
	}{
		{HashIP, Entry{Addr: netip.MustParseAddr("1.1.1.1")}, true},
		{HashIP, Entry{}, false},
		{HashIP, Entry{Net: netip.MustParsePrefix("1.1.1.0/24")}, false},
		{HashIPPort, ipPort("1.1.1.1", 0, 80), false},
		{HashIPPort, ipPort("1.1.1.1", inet.TCP, 80), true},
		{HashIP, Entry{Addr: netip.MustParseAddr("1.1.1.1"), Timeout: 1500 * time.Millisecond}, false},
		{HashIP, Entry{Addr: netip.MustParseAddr("1.1.1.1"), Comment: `a"b`}, false},
		{BitmapPort, Entry{Port: 1, Protocol: inet.TCP}, false},
	}
	for _, tt := range tests {
		if err := tt.e.check(tt.typ); (err == nil) != tt.ok {
			t.Errorf("check(%s, %#v) = %v, want ok=%v", tt.typ, tt.e, err, tt.ok)
		}
	}
}
