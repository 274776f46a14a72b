package ipvs

import (
	"reflect"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// Each decoder must not panic on any input, and what it decodes must
// survive encoding and decoding again unchanged.

func FuzzDecodeService(f *testing.F) {
	for _, s := range sampleServices {
		f.Add(encodeServiceReply(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeService(b)
		if err != nil {
			return
		}
		again, err := decodeService(encodeServiceReply(s))
		if err != nil {
			t.Fatalf("re-decoding %+v: %v", s, err)
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed\n%+v\n%+v", s, again)
		}
	})
}

func FuzzDecodeDestination(f *testing.F) {
	for _, d := range sampleDestinations {
		f.Add(encodeDestinationReply(d), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		fam := IPv4
		if v6 {
			fam = IPv6
		}
		d, err := decodeDestination(b, fam)
		if err != nil {
			return
		}
		again, err := decodeDestination(encodeDestinationReply(d), fam)
		if err != nil {
			t.Fatalf("re-decoding %+v: %v", d, err)
		}
		if !reflect.DeepEqual(d, again) {
			t.Fatalf("round trip changed\n%+v\n%+v", d, again)
		}
	})
}

func FuzzDecodeStats(f *testing.F) {
	for _, wide := range []bool{false, true} {
		ae := netlink.NewAttributeEncoder()
		encodeStatsReply(ae, sampleStats, wide)
		b, _ := ae.Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeStats(b)
		if err != nil {
			return
		}
		ae := netlink.NewAttributeEncoder()
		encodeStatsReply(ae, s, true)
		enc, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if again, err := decodeStats(enc); err != nil || again != s {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, s)
		}
	})
}

func FuzzDecodeTimeouts(f *testing.F) {
	f.Add(encodeTimeoutsReply(Timeouts{TCP: 900e9, TCPFin: 120e9, UDP: 300e9}))
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := decodeTimeouts(b)
		if err != nil {
			return
		}
		if again, err := decodeTimeouts(encodeTimeoutsReply(tm)); err != nil || again != tm {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, tm)
		}
	})
}

func FuzzDecodeInfo(f *testing.F) {
	f.Add(encodeInfoReply(Info{Version: Version{1, 2, 1}, ConnTableSize: 4096}))
	f.Fuzz(func(t *testing.T, b []byte) {
		i, err := decodeInfo(b)
		if err != nil {
			return
		}
		if again, err := decodeInfo(encodeInfoReply(i)); err != nil || again != i {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, i)
		}
	})
}

// FuzzParseMessages covers the datagram splitter and the status parser
// that read every reply.
func FuzzParseMessages(f *testing.F) {
	ack := ackMessage(netlink.Message{Header: netlink.Header{Length: 36, Sequence: 9}}, -17, "scheduler not found")
	b := marshalExact(ack)
	f.Add(b)
	done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: 3}, Data: []byte{0, 0, 0, 0}}
	f.Add(append(marshalExact(done), b...))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := nl.ParseMessages(b)
		if err != nil {
			return
		}
		var out []byte
		for _, m := range msgs {
			if m.Header.Type == netlink.Error || m.Header.Type == netlink.Done {
				_, _ = nl.ParseError(m)
			}
			out = append(out, marshalExact(m)...)
		}
		again, err := nl.ParseMessages(out)
		if err != nil || len(again) != len(msgs) {
			t.Fatalf("round trip: %d messages, %v; want %d", len(again), err, len(msgs))
		}
		for i := range msgs {
			if again[i].Header.Type != msgs[i].Header.Type || again[i].Header.Sequence != msgs[i].Header.Sequence ||
				string(again[i].Data) != string(msgs[i].Data) {
				t.Fatalf("message %d changed: %+v, want %+v", i, again[i], msgs[i])
			}
		}
	})
}
