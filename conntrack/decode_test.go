package conntrack

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/inet"
)

// dumpReplyMessages returns the entry messages of the dump the kernel sent
// to conntrack -L in testdata/capture.sh.
func dumpReplyMessages(t *testing.T) [][]byte {
	t.Helper()
	var msgs [][]byte
	for _, dgram := range readStrace(t, "dump-reply") {
		for _, m := range splitMessages(t, dgram) {
			if binary.NativeEndian.Uint16(m[4:]) == subsysCTNetlink<<8|msgNew {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

func TestDecodeKernelDump(t *testing.T) {
	a := netip.MustParseAddr
	want := []Flow{
		{
			Orig:   Tuple{Src: a("10.0.0.1"), Dst: a("10.0.0.2"), Protocol: inet.UDP, SrcPort: 1000, DstPort: 53},
			Reply:  Tuple{Src: a("10.0.0.2"), Dst: a("10.0.0.1"), Protocol: inet.UDP, SrcPort: 53, DstPort: 1000},
			Status: StatusConfirmed,
		},
		{
			Orig:   Tuple{Src: a("10.0.0.1"), Dst: a("10.0.0.3"), Protocol: inet.UDP, SrcPort: 1000, DstPort: 53},
			Reply:  Tuple{Src: a("10.0.0.3"), Dst: a("10.0.0.1"), Protocol: inet.UDP, SrcPort: 53, DstPort: 1000},
			Zone:   3,
			Mark:   7,
			Status: StatusAssured | StatusConfirmed,
		},
		{
			Orig:   Tuple{Src: a("fd00::1"), Dst: a("fd00::2"), Protocol: inet.UDP, SrcPort: 1000, DstPort: 53},
			Reply:  Tuple{Src: a("fd00::2"), Dst: a("fd00::1"), Protocol: inet.UDP, SrcPort: 53, DstPort: 1000},
			Status: StatusConfirmed,
		},
		{
			Orig:   Tuple{Src: a("fd00::1"), Dst: a("fd00::2"), Protocol: inet.TCP, SrcPort: 1000, DstPort: 80},
			Reply:  Tuple{Src: a("fd00::2"), Dst: a("fd00::1"), Protocol: inet.TCP, SrcPort: 80, DstPort: 1000},
			Status: StatusConfirmed,
		},
	}
	var got []Flow
	for _, m := range dumpReplyMessages(t) {
		f, err := decodeFlow(m[16:])
		if err != nil {
			t.Fatal(err)
		}
		if f.ID == 0 || f.Timeout <= 0 || f.Timeout > 100*time.Second {
			t.Errorf("%v: id %d timeout %v", f, f.ID, f.Timeout)
		}
		f.ID, f.Timeout = 0, 0
		got = append(got, f)
	}
	sortFlows(got)
	sortFlows(want)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("decoded dump (-want +got):\n%s", diff)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no tuple", []byte{2, 0, 0, 0}},
		{"truncated attribute", []byte{2, 0, 0, 0, 8, 0, 3, 0, 0}},
		{"bad address length", []byte{2, 0, 0, 0,
			16, 0, 1, 0x80, // CTA_TUPLE_ORIG
			12, 0, 1, 0x80, // CTA_TUPLE_IP
			7, 0, 1, 0, 10, 0, 0, 0, // 3-byte CTA_IP_V4_SRC
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f, err := decodeFlow(tt.data); err == nil {
				t.Errorf("decoded %v, want an error", f)
			}
		})
	}
}

func TestDecodeStats(t *testing.T) {
	data := []byte{0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 42, 8, 0, 2, 0, 0, 4, 0, 0}
	n, err := decodeStatsEntries(data)
	if err != nil || n != 42 {
		t.Errorf("got %d, %v; want 42", n, err)
	}
	if _, err := decodeStatsEntries(data[:4]); err == nil {
		t.Error("no error without the entry count")
	}
}
