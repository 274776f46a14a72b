package nftrulestest

import (
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NFT_MSG_GETGEN, which no google/nftables method sends, reads the
// generation a committed batch moves and a refused one does not.
func TestGeneration(t *testing.T) {
	k := New(nil)
	read := func() uint32 {
		t.Helper()
		s := &socket{k: k}
		req := netlink.Message{
			Header: netlink.Header{Type: unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN, Flags: netlink.Request | netlink.Acknowledge, Sequence: 7},
			Data:   nl.AppendNFGenMsg(nil, unix.AF_UNSPEC, nl.NFNetlinkV0),
		}
		if _, err := s.serve([]netlink.Message{req}); err != nil {
			t.Fatal(err)
		}
		msgs, err := s.serve(nil)
		if err != nil || len(msgs) != 1 || msgs[0].Header.Type != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN {
			t.Fatalf("GETGEN answered %v, %v", msgs, err)
		}
		d := nl.NewReader(msgs[0].Data[nl.NFGenMsgLen:], "generation")
		for d.Next() {
			if d.Type() == unix.NFTA_GEN_ID {
				return d.BE32()
			}
		}
		t.Fatal("no NFTA_GEN_ID")
		return 0
	}
	conn := k.Dial()
	before := read()
	conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t"})
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "missing"})
	if err := conn.Flush(); err == nil {
		t.Fatal("deleting a missing table succeeded")
	}
	if got := read(); got != before+1 || got != k.Generation() {
		t.Errorf("generation %d after one committed and one refused batch, from %d (Generation %d)", got, before, k.Generation())
	}
}
