package conntrack

import (
	"testing"
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
		if validTuple(fl.Orig) != nil || !hasPorts(fl.Orig.Protocol) {
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
