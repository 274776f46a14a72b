package nftrules

import (
	"bytes"
	"testing"
)

// The bytes iptables-nft sends for "-m set --match-set B dst,dst,src" with
// B the set of index 1 (captured with strace).
func TestSetMatchInfoMatchesIptables(t *testing.T) {
	want := append([]byte{0x01, 0x00, 0x03, 0x08}, make([]byte, 44)...)
	got := *setMatchInfo(1, setMatch{set: "B", dirs: []string{"dst", "dst", "src"}})
	if !bytes.Equal(got, want) {
		t.Errorf("xt_set_info_match_v4:\n got %x\nwant %x", got, want)
	}
	inverted := *setMatchInfo(0, setMatch{set: "A", dirs: []string{"src", "dst"}, invert: true})
	if inverted[2] != 2 || inverted[3] != 0b011 {
		t.Errorf("! src,dst encodes dim %d flags %#b, want 2 and 0b011", inverted[2], inverted[3])
	}
}
