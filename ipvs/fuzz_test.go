package ipvs

import (
	"reflect"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
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
		fam := inet.IPv4
		if v6 {
			fam = inet.IPv6
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
