package conntrack

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"golang.org/x/sys/unix"
)

// udpFlows makes n UDP entries from distinct source ports to dst:53, with
// IDs from firstID.
func udpFlows(n int, dst string, firstID uint32) []Flow {
	flows := make([]Flow, n)
	for i := range flows {
		flows[i] = Flow{
			Orig: Tuple{
				Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr(dst),
				Protocol: inet.UDP, SrcPort: uint16(10000 + i), DstPort: 53,
			},
			ID: firstID + uint32(i),
		}
	}
	return flows
}

func TestDeleteMatchingBatches(t *testing.T) {
	tests := []struct {
		name        string
		matching    int
		others      int
		ghosts      int
		wantWrites  []int
		wantDeleted int
	}{
		{"none", 0, 5, 0, nil, 0},
		{"one write", 3, 5, 0, []int{3}, 3},
		{"vanished entries are not errors", 3, 5, 2, []int{5}, 3},
		{"several writes", 300, 10, 0, []int{100, 100, 100}, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &fakeKernel{t: t}
			k.table = append(udpFlows(tt.matching, "10.96.0.10", 1), udpFlows(tt.others, "10.96.0.11", 5000)...)
			k.ghosts = udpFlows(tt.ghosts, "10.96.0.10", 9000)
			for i := range k.ghosts {
				k.ghosts[i].Orig.SrcPort += 30000
			}
			c := k.conn()
			defer c.Close()
			f := ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 53)
			n, err := c.DeleteMatching(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantDeleted {
				t.Errorf("deleted %d, want %d", n, tt.wantDeleted)
			}
			if len(k.table) != tt.others {
				t.Errorf("%d entries left, want %d", len(k.table), tt.others)
			}
			if len(k.deleteWrites) != len(tt.wantWrites) {
				t.Fatalf("%d delete writes, want %d", len(k.deleteWrites), len(tt.wantWrites))
			}
			for i, acks := range k.deleteWrites {
				if len(acks) != tt.wantWrites[i] {
					t.Errorf("write %d held %d deletes, want %d", i, len(acks), tt.wantWrites[i])
				}
				for j, ack := range acks {
					if ack != (j == len(acks)-1) {
						t.Errorf("write %d delete %d: ack %v; only the last should ask", i, j, ack)
					}
				}
			}
		})
	}
}

func TestDeleteMatchingReportsOtherErrors(t *testing.T) {
	k := &fakeKernel{t: t, table: udpFlows(3, "10.96.0.10", 1), deleteErrno: unix.EPERM}
	c := k.conn()
	defer c.Close()
	f := ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 0)
	n, err := c.DeleteMatching(context.Background(), f)
	if n != 0 || !errors.Is(err, unix.EPERM) {
		t.Fatalf("got %d, %v; want 0 and EPERM", n, err)
	}
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != "delete" || oe.Object == "" {
		t.Errorf("error %#v does not name the operation and entry", err)
	}
}

func TestDumpRetriesInterrupted(t *testing.T) {
	k := &fakeKernel{t: t, table: udpFlows(4, "10.96.0.10", 1), interruptions: 2}
	c := k.conn()
	defer c.Close()
	flows, err := c.Dump(context.Background(), All())
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != 4 || k.dumps != 3 {
		t.Errorf("%d entries after %d dumps, want 4 after 3", len(flows), k.dumps)
	}

	k.interruptions = maxDumpAttempts
	if _, err := c.Dump(context.Background(), All()); !errors.Is(err, ErrDumpInterrupted) {
		t.Errorf("got %v, want ErrDumpInterrupted", err)
	}
}

func TestDumpFallsBackWithoutKernelFilter(t *testing.T) {
	k := &fakeKernel{t: t, refuseFilter: true}
	k.table = append(udpFlows(3, "10.96.0.10", 1), udpFlows(4, "10.96.0.11", 100)...)
	c := k.conn()
	defer c.Close()
	f := ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 53)
	n, err := c.Count(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("counted %d, want 3", n)
	}
	if got := kernelLevel(c.level.Load()); got != levelMark {
		t.Errorf("level %d after EOPNOTSUPP, want %d", got, levelMark)
	}
	if k.dumps != 2 {
		t.Errorf("%d dumps, want 2 (refused, then without CTA_FILTER)", k.dumps)
	}
}

func TestCanceledContext(t *testing.T) {
	k := &fakeKernel{t: t}
	c := k.conn()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Dump(ctx, All()); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if k.writes != 0 {
		t.Errorf("%d writes after cancellation, want 0", k.writes)
	}
}

func TestOpErrorUnwrap(t *testing.T) {
	tests := []struct {
		errno    unix.Errno
		sentinel error
	}{
		{unix.ENOENT, ErrFlowNotExist},
		{unix.EEXIST, ErrFlowExist},
	}
	for _, tt := range tests {
		err := opError("get", "x", tt.errno)
		if !errors.Is(err, tt.sentinel) || !errors.Is(err, tt.errno) {
			t.Errorf("%v: does not match %v and its errno", err, tt.sentinel)
		}
	}
	if err := opError("get", "x", unix.EPERM); errors.Is(err, ErrFlowNotExist) {
		t.Errorf("%v matches ErrFlowNotExist", err)
	}
}

// Deleting needs All() to delete everything: a Filter with no field set,
// such as one whose fields were forgotten, is an error that deletes
// nothing.
func TestDeleteMatchingEmptyFilter(t *testing.T) {
	k := &fakeKernel{t: t, table: udpFlows(3, "10.96.0.10", 1)}
	c := k.conn()
	defer c.Close()
	n, err := c.DeleteMatching(context.Background(), Filter{})
	if n != 0 || !errors.Is(err, ErrFilterEmpty) || len(k.table) != 3 {
		t.Fatalf("DeleteMatching(Filter{}) = %d, %v; %d entries left", n, err, len(k.table))
	}
	if n, err := c.DeleteMatching(context.Background(), All()); n != 3 || err != nil || len(k.table) != 0 {
		t.Fatalf("DeleteMatching(All()) = %d, %v; %d entries left", n, err, len(k.table))
	}
}

// DeleteFunc deletes, of the entries the filter selects, those its
// function picks, and never shows it an entry the filter leaves out.
func TestDeleteFunc(t *testing.T) {
	k := &fakeKernel{t: t}
	k.table = append(udpFlows(6, "10.96.0.10", 1), udpFlows(4, "10.96.0.11", 100)...)
	c := k.conn()
	defer c.Close()
	seen := 0
	n, err := c.DeleteFunc(context.Background(), ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 53), func(f *Flow) bool {
		seen++
		if f.Orig.Dst != netip.MustParseAddr("10.96.0.10") {
			t.Errorf("the function saw %v, which the filter leaves out", f)
		}
		return f.Orig.SrcPort%2 == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || seen != 6 || len(k.table) != 7 {
		t.Errorf("deleted %d after seeing %d, %d left; want 3 of 6, 7 left", n, seen, len(k.table))
	}
	for _, f := range k.table {
		if f.Orig.Dst == netip.MustParseAddr("10.96.0.10") && f.Orig.SrcPort%2 == 0 {
			t.Errorf("%v was picked and is still there", f)
		}
	}
}
