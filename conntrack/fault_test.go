package conntrack

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"golang.org/x/sys/unix"
)

// The fault hook fails the requests it picks with its errno before they
// reach the kernel; a batch's other requests go through, and the ack is
// still asked of the last one sent.
func TestFaultHook(t *testing.T) {
	k := &fakeKernel{t: t, table: udpFlows(10, "10.96.0.10", 1)}
	c := k.conn()
	defer c.Close()
	var asked []string
	ctx := withFault(t, "conntrack", func(req string) error {
		asked = append(asked, req)
		// The dump is the first request; then every third delete fails,
		// the last of the batch among them.
		if n := len(asked); n > 1 && (n-1)%3 == 1 {
			return unix.ENOBUFS
		}
		return nil
	})
	f := ByDestination(inet.UDP, netip.MustParseAddr("10.96.0.10"), 53)
	n, err := c.DeleteMatching(ctx, f)
	if n != 6 || !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("DeleteMatching: %d deleted, %v; want 6 and ENOBUFS", n, err)
	}
	if asked[0] != "get" || asked[1] != "delete" {
		t.Errorf("the hook was asked about %q", asked[:2])
	}
	if len(k.table) != 4 {
		t.Errorf("%d entries left, want 4", len(k.table))
	}
	if acks := k.deleteWrites[0]; len(acks) != 6 || !acks[5] {
		t.Errorf("the write held %v; want 6 deletes, the last asking for an ack", acks)
	}

	// A failed dump is the whole operation's error.
	asked = asked[:0]
	ctx = withFault(t, "conntrack", func(string) error { return unix.EBUSY })
	if _, err := c.DeleteMatching(ctx, f); !errors.Is(err, unix.EBUSY) {
		t.Errorf("DeleteMatching with a failed dump: %v", err)
	}
}

// withFault returns a context carrying a fault hook for package pkg.
func withFault(t *testing.T, pkg string, hook func(request string) error) context.Context {
	return fault.With(context.Background(), func(p, req string) error {
		if p != pkg {
			t.Errorf("the hook was asked by package %q, want %q", p, pkg)
		}
		return hook(req)
	})
}
