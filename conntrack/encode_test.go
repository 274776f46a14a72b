package conntrack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

var (
	udp4 = Tuple{
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Protocol: inet.UDP, SrcPort: 1000, DstPort: 53,
	}
	udp6 = Tuple{
		Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"),
		Protocol: inet.UDP, SrcPort: 1000, DstPort: 53,
	}
)

func mustMessage(t *testing.T) func(*nl.Request, error) *nl.Request {
	return func(m *nl.Request, err error) *nl.Request {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// marshalAs gives m the captured message's sequence number and marshals it.
func marshalAs(t *testing.T, m *nl.Request, captured []byte) []byte {
	t.Helper()
	return nl.AppendMessage(nil, m.Type, netlink.Request|m.Flags, binary.NativeEndian.Uint32(captured[8:]), 0, m.Data)
}

// TestEncodeMatchesConntrackProgram compares the messages this package sends
// with what conntrack-tools sends for the same request (testdata/capture.sh).
func TestEncodeMatchesConntrackProgram(t *testing.T) {
	must := mustMessage(t)
	udp4b := udp4
	udp4b.Dst = netip.MustParseAddr("10.0.0.3")
	// conntrack -F -f ipv6 sends nfgenmsg version 0, with which the kernel
	// flushes both families; this package sends version 1.
	flush6 := encodeFlush(inet.IPv6)
	flush6.Data[1] = 0
	tests := []struct {
		capture string
		msg     *nl.Request
	}{
		{"create4", must(encodeNew(Flow{Orig: udp4, Timeout: 100 * time.Second}, true))},
		{"create4-full", must(encodeNew(Flow{
			Orig: udp4b, Timeout: 100 * time.Second,
			Status: StatusAssured | StatusConfirmed, Mark: 7, Zone: 3,
		}, true))},
		{"create6", must(encodeNew(Flow{Orig: udp6, Timeout: 100 * time.Second}, true))},
		{"get4", must(encodeLookup(msgGet, udp4, 0, 0, true))},
		{"get6", must(encodeLookup(msgGet, udp6, 0, 0, true))},
		{"flush", encodeFlush(0)},
		{"flush6", flush6},
		{"count", encodeStats()},
		{"dump4", must((&Filter{Family: inet.IPv4}).dumpRequest(inet.IPv4, levelTuple))},
		{"dump-mark", must((&Filter{Mark: 5, MarkMask: 0xff}).dumpRequest(0, levelTuple))},
	}
	for _, tt := range tests {
		t.Run(tt.capture, func(t *testing.T) {
			want := readStrace(t, tt.capture)[0]
			got := marshalAs(t, tt.msg, want)
			if !bytes.Equal(canonical(got), canonical(want)) {
				t.Errorf("message differs from conntrack's\ngot:  % x\nwant: % x", canonical(got), canonical(want))
			}
		})
	}
}

// TestEncodeDeleteTuple checks a delete against the one conntrack -D sends.
// conntrack also sends the reply tuple, status, timeout and mark it dumped,
// which the kernel does not use to find the entry; the header, family and
// original tuple must match.
func TestEncodeDeleteTuple(t *testing.T) {
	want := readStrace(t, "delete4")[0]
	got := marshalAs(t, mustMessage(t)(encodeLookup(msgDelete, udp4, 0, 0, true)), want)
	if !bytes.Equal(got[4:8], want[4:8]) {
		t.Errorf("type and flags % x, want % x", got[4:8], want[4:8])
	}
	if got[16] != want[16] {
		t.Errorf("family %d, want %d", got[16], want[16])
	}
	origLen := int(binary.NativeEndian.Uint16(want[20:]))
	if !bytes.Equal(got[20:20+origLen], want[20:20+origLen]) {
		t.Errorf("original tuple\ngot:  % x\nwant: % x", got[20:20+origLen], want[20:20+origLen])
	}
	if len(got) != 20+origLen {
		t.Errorf("delete carries %d bytes after the tuple, want none", len(got)-20-origLen)
	}
}

func TestEncodeRejectsIncompleteTuples(t *testing.T) {
	tests := []struct {
		name string
		t    Tuple
	}{
		{"no source", Tuple{Dst: udp4.Dst, Protocol: inet.UDP}},
		{"mixed families", Tuple{Src: udp4.Src, Dst: udp6.Dst, Protocol: inet.UDP}},
		{"no protocol", Tuple{Src: udp4.Src, Dst: udp4.Dst}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := encodeLookup(msgDelete, tt.t, 0, 0, false); err == nil {
				t.Error("no error")
			}
			if _, err := encodeNew(Flow{Orig: tt.t}, false); err == nil {
				t.Error("no error from encodeNew")
			}
		})
	}
}

func TestEncodeLookupZoneAndID(t *testing.T) {
	m := mustMessage(t)(encodeLookup(msgDelete, udp4, 3, 0xdeadbeef, false))
	ad, err := newDecoder(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	var zone uint16
	var id uint32
	for ad.Next() {
		switch ad.Type() {
		case ctaZone:
			zone = ad.BE16()
		case ctaID:
			id = ad.BE32()
		}
	}
	if zone != 3 || id != 0xdeadbeef {
		t.Errorf("zone %d id %#x, want 3 and 0xdeadbeef", zone, id)
	}
	if netlink.Request|m.Flags != netlink.Request {
		t.Errorf("flags %v, want request only", netlink.Request|m.Flags)
	}
}
