package conntrack

import (
	"encoding/binary"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// FuzzDecodeFlow feeds arbitrary payloads to the entry decoder. Entries it
// accepts must survive a round trip through the encoder.
func FuzzDecodeFlow(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := decodeFlow(data)
		if err != nil {
			return
		}
		if validTuple(fl.Orig) != nil || !fl.Orig.Protocol.hasPorts() {
			return
		}
		w := newWriter(fl.Family())
		encodeTuple(w, ctaTupleOrig, fl.Orig)
		again, err := decodeFlow(w.B)
		if err != nil {
			t.Fatalf("re-decoding %v: %v", fl.Orig, err)
		}
		want := Tuple{Src: fl.Orig.Src, Dst: fl.Orig.Dst, Protocol: fl.Orig.Protocol, SrcPort: fl.Orig.SrcPort, DstPort: fl.Orig.DstPort}
		if again.Orig != want {
			t.Fatalf("round trip changed %v into %v", want, again.Orig)
		}
	})
}

// FuzzDecodeStats feeds arbitrary payloads to the statistics decoder.
func FuzzDecodeStats(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 42})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := decodeStatsEntries(data)
		if err == nil && n < 0 {
			t.Fatalf("negative count %d", n)
		}
	})
}

// FuzzErrorMessage feeds arbitrary payloads and flags to the NLMSG_ERROR
// parser: an ack is nil, anything else an error.
func FuzzErrorMessage(f *testing.F) {
	f.Add(uint16(0x100), []byte{0xfe, 0xff, 0xff, 0xff})
	f.Add(uint16(0), []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, flags uint16, data []byte) {
		ke, perr := nl.ParseError(netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: netlink.HeaderFlags(flags)}, Data: data})
		ack := len(data) >= 4 && binary.NativeEndian.Uint32(data) == 0
		if (ke == nil && perr == nil) != ack {
			err := error(ke)
			if perr != nil {
				err = perr
			}
			t.Fatalf("errorMessage(%x) = %v", data, err)
		}
	})
}

// FuzzParseDatagram feeds arbitrary datagrams to the splitter that reads
// every reply: the messages it returns lie within the datagram, and each
// decodes or fails without panicking.
func FuzzParseDatagram(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := nl.ParseMessages(b)
		if err != nil {
			return
		}
		total := 0
		for _, m := range msgs {
			if int(m.Header.Length) < 16 {
				t.Fatalf("message of length %d", m.Header.Length)
			}
			total += int(m.Header.Length)
			if m.Header.Type == netlink.Error {
				_, _ = nl.ParseError(m)
			} else {
				_, _ = decodeFlow(m.Data)
			}
		}
		if total > len(b) {
			t.Fatalf("%d bytes of messages in a datagram of %d", total, len(b))
		}
	})
}
