//go:build hosttest || vmtest

package ipset

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

// A fault hook on the context fails the messages it picks with its errno, before they
// reach the kernel; a bulk load stops at the failed message, and the same
// load again with ExistOK completes it.
func TestFaultHook(t *testing.T) {
	ns := testutil.NewNetNS(t)
	var asked []string
	fail := map[int]bool{}
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := fault.With(testutil.Context(t), func(pkg, req string) error {
		if pkg != "ipset" {
			t.Errorf("the hook was asked by package %q", pkg)
		}
		asked = append(asked, req)
		if fail[len(asked)] {
			return unix.ENOBUFS
		}
		return nil
	})

	fail[1] = true
	if err := c.Create(ctx, Set{Name: "s", Type: HashIPPort}, ExistOK); !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Create with a fault: %v", err)
	}
	// Create first asks the kernel for the type's newest revision.
	if asked[0] != "type" {
		t.Errorf("the hook was asked about %q", asked[0])
	}
	if err := c.Create(ctx, Set{Name: "s", Type: HashIPPort, MaxElem: 1 << 20}, ExistOK); err != nil {
		t.Fatal(err)
	}
	entries := make([]Entry, 30000)
	for i := range entries {
		entries[i] = Entry{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Protocol: inet.TCP, Port: 80}
	}
	// Large enough for several messages: fail the second.
	asked = asked[:0]
	fail = map[int]bool{3: true}
	err = c.AddEntries(ctx, "s", entries, ExistOK)
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("AddEntries with a fault: %v", err)
	}
	h, err := c.Header(ctx, "s")
	if err != nil || h.Entries == 0 || int(h.Entries) >= len(entries) {
		t.Fatalf("after the fault the set holds %d of %d entries (%v); want some", h.Entries, len(entries), err)
	}
	if err := c.AddEntries(ctx, "s", entries, ExistOK); err != nil {
		t.Fatal(err)
	}
	if h, err := c.Header(ctx, "s"); err != nil || int(h.Entries) != len(entries) {
		t.Fatalf("after the retry the set holds %d of %d entries (%v)", h.Entries, len(entries), err)
	}
}
