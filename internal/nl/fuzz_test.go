package nl

import (
	"encoding/binary"
	"testing"

	"github.com/mdlayher/netlink"
)

func marshal(m netlink.Message) []byte {
	return AppendMessage(nil, uint16(m.Header.Type), m.Header.Flags, m.Header.Sequence, m.Header.PID, m.Data)
}

// FuzzParseMessages covers the datagram splitter and the error parser
// that read every reply: what they accept survives a round trip, and an
// error message is an error exactly when its code is not 0.
func FuzzParseMessages(f *testing.F) {
	ack := marshal(Ack(netlink.Message{Header: netlink.Header{Sequence: 9}, Data: make([]byte, 20)}, 17, "scheduler not found"))
	f.Add(ack)
	done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: 3}, Data: []byte{0, 0, 0, 0}}
	f.Add(append(marshal(done), ack...))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := ParseMessages(b)
		if err != nil {
			return
		}
		var out []byte
		for _, m := range msgs {
			if m.Header.Type == netlink.Error || m.Header.Type == netlink.Done {
				ke, perr := ParseError(m)
				ack := len(m.Data) >= 4 && binary.NativeEndian.Uint32(m.Data) == 0
				if perr == nil && (ke == nil) != ack {
					t.Fatalf("ParseError(%x) = %v", m.Data, ke)
				}
			}
			out = append(out, marshal(m)...)
		}
		again, err := ParseMessages(out)
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
