//go:build hosttest || vmtest

package ipset

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestHostSetOperations(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	a := Set{Name: "a", Type: HashIP}
	b := Set{Name: "b", Type: HashIP}
	for _, s := range []Set{a, b} {
		if err := c.Create(ctx, s, Exclusive); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, a, ExistOK); err != nil {
		t.Errorf("Create ExistOK of an identical set: %v", err)
	}
	names, err := c.Names(ctx)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Names = %q, %v", names, err)
	}
	if got := strings.Fields(ns.Run(t, "ipset", "list", "-n")); !slices.Equal(got, names) {
		t.Errorf("ipset list -n = %q", got)
	}
	// The kernel hands out indexes in creation order in a fresh namespace.
	for want, name := range []string{"a", "b"} {
		if idx, err := c.Index(ctx, name); err != nil || int(idx) != want {
			t.Errorf("Index(%s) = %d, %v; want %d", name, idx, err, want)
		}
	}
	one := Entry{Addr: netip.MustParseAddr("10.0.0.1")}
	two := Entry{Addr: netip.MustParseAddr("10.0.0.2")}
	if err := c.Add(ctx, "a", one, Exclusive); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, "b", two, Exclusive); err != nil {
		t.Fatal(err)
	}
	if err := c.Swap(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "a", []string{"10.0.0.2"})
	crossCheck(t, ns, c, "b", []string{"10.0.0.1"})
	if idx, err := c.Index(ctx, "a"); err != nil || idx != 0 {
		t.Errorf("after swap, Index(a) = %d, %v; the index stays with the name", idx, err)
	}
	if err := c.Rename(ctx, "b", "c"); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "c", []string{"10.0.0.1"})
	if idx, err := c.Index(ctx, "c"); err != nil || idx != 1 {
		t.Errorf("after rename, Index(c) = %d, %v; want 1", idx, err)
	}
	h, err := c.Header(ctx, "c")
	if err != nil || h.Entries != 1 || h.Type != HashIP || h.Family != inet.IPv4 || h.Revision == 0 {
		t.Errorf("Header = %+v, %v", h, err)
	}
	if err := c.Flush(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "c", nil)
	for _, name := range []string{"a", "c"} {
		if err := c.Destroy(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if out := ns.Run(t, "ipset", "list", "-n"); out != "" {
		t.Errorf("sets left: %q", out)
	}
}

func TestHostErrors(t *testing.T) {
	_, c := dialNS(t)
	ctx := testutil.Context(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, Set{Name: "ip", Type: HashIP, MaxElem: 2}, Exclusive))
	must(c.Create(ctx, Set{Name: "net", Type: HashNet}, Exclusive))
	must(c.Create(ctx, Set{Name: "ports", Type: BitmapPort, PortFrom: 100, PortTo: 200}, Exclusive))
	one := Entry{Addr: netip.MustParseAddr("10.0.0.1")}
	must(c.Add(ctx, "ip", one, Exclusive))
	tests := []struct {
		name     string
		err      error
		sentinel error
		errno    unix.Errno
	}{
		{"add to missing set", c.Add(ctx, "nope", one, ExistOK), ErrSetNotExist, unix.ENOENT},
		{"destroy missing set", c.Destroy(ctx, "nope"), ErrSetNotExist, unix.ENOENT},
		{"list missing set", func() error { _, _, err := c.List(ctx, "nope"); return err }(), ErrSetNotExist, unix.ENOENT},
		{"index of missing set", func() error { _, err := c.Index(ctx, "nope"); return err }(), ErrSetNotExist, unix.ENOENT},
		{"create existing", c.Create(ctx, Set{Name: "ip", Type: HashIP, MaxElem: 2}, Exclusive), ErrSetExist, unix.EEXIST},
		{"create existing differently", c.Create(ctx, Set{Name: "ip", Type: HashNet}, ExistOK), ErrSetExist, unix.EEXIST},
		{"rename onto existing", c.Rename(ctx, "ip", "net"), ErrSetExist, errExistSetName},
		{"swap different types", c.Swap(ctx, "ip", "net"), ErrTypeMismatch, errTypeMismatch},
		{"add existing entry", c.Add(ctx, "ip", one, Exclusive), ErrEntryExist, errExist},
		{"delete missing entry", c.Delete(ctx, "ip", Entry{Addr: netip.MustParseAddr("10.9.9.9")}, Exclusive), ErrEntryNotExist, errExist},
		{"add to full set", func() error {
			must(c.Add(ctx, "ip", Entry{Addr: netip.MustParseAddr("10.0.0.2")}, Exclusive))
			return c.Add(ctx, "ip", Entry{Addr: netip.MustParseAddr("10.0.0.3")}, Exclusive)
		}(), ErrSetFull, errHashFull},
		{"port out of bitmap range", c.Add(ctx, "ports", Entry{Port: 300}, ExistOK), ErrEntryOutOfRange, errBitmapRange},
		// The kernel finds no IPv4 address attribute.
		{"IPv6 entry in IPv4 set", c.Add(ctx, "ip", Entry{Addr: netip.MustParseAddr("fd00::1")}, ExistOK), ErrProtocolMismatch, errProtocol},
		// Not hash:mac, which the host's kernel lacks but the VM's has.
		{"type the kernel lacks", func() error {
			_, err := c.revision(ctx, "hash:nosuchtype", inet.IPv4)
			return opError("create", "m", "", err)
		}(), ErrTypeNotSupported, errFindType},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.sentinel) || !errors.Is(tt.err, tt.errno) {
			t.Errorf("%s: %v; want %v and errno %d", tt.name, tt.err, tt.sentinel, int(tt.errno))
		}
	}
	// Entries that do not fit the set type never reach the kernel.
	for _, e := range []Entry{{Addr: netip.MustParseAddr("10.0.0.1")}, {Net: netip.MustParsePrefix("fd00::/64")}} {
		if err := c.AddEntries(ctx, "net", []Entry{e}, ExistOK); !errors.Is(err, ErrEntryInvalid) {
			t.Errorf("adding %s to an IPv4 hash:net: %v", e, err)
		}
	}
}

func TestHostBulkErrorsNameEntries(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	if err := c.Create(ctx, Set{Name: "s", Type: HashIPPort, MaxElem: 100000}, Exclusive); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	entries := make([]Entry, n)
	var want []string
	for i := range entries {
		entries[i] = ipPort(netip.AddrFrom4([4]byte{10, 1, byte(i / 256), byte(i % 256)}).String(), inet.TCP, 80)
		want = append(want, entries[i].String())
	}
	// Entries already there fail an exclusive add, spread over messages.
	dups := []int{0, 1, 777, 2500, 4999}
	for _, i := range dups {
		if err := c.Add(ctx, "s", entries[i], Exclusive); err != nil {
			t.Fatal(err)
		}
	}
	err := c.AddEntries(ctx, "s", entries, Exclusive)
	var bulk *BatchError
	if !errors.As(err, &bulk) {
		t.Fatalf("AddEntries: %v, want a *BatchError", err)
	}
	var got []int
	for _, ee := range bulk.Failed {
		got = append(got, ee.Index)
		if !errors.Is(ee, ErrEntryExist) || ee.Object != "s "+entries[ee.Index].String() {
			t.Errorf("entry error %v", ee)
		}
	}
	if !slices.Equal(got, dups) {
		t.Errorf("failed entries %v, want %v", got, dups)
	}
	if !errors.Is(err, ErrEntryExist) {
		t.Errorf("errors.Is(bulk error, ErrEntryExist) is false")
	}
	// Every other entry went in, including those after a failed one in
	// the same message.
	crossCheck(t, ns, c, "s", want)

	err = c.DeleteEntries(ctx, "s", entries[:10], Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	err = c.DeleteEntries(ctx, "s", entries[:20], Exclusive)
	if !errors.As(err, &bulk) || len(bulk.Failed) != 10 || !errors.Is(err, ErrEntryNotExist) {
		t.Errorf("deleting 10 missing entries of 20: %v", err)
	}
	crossCheck(t, ns, c, "s", want[20:])
}

func TestHostContext(t *testing.T) {
	_, c := dialNS(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Names(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Names past the deadline: %v", err)
	}
	// The Conn stays usable.
	if _, err := c.Names(testutil.Context(t)); err != nil {
		t.Errorf("Names after a cancelled call: %v", err)
	}
}

// A full set refuses the entry that finds it full; the library reports the
// ones after it full too, and the kernel holds what fitted.
func TestHostAddEntriesFullSet(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	if err := c.Create(ctx, Set{Name: "s", Type: HashIP, MaxElem: 4}, Exclusive); err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	for i := range 10 {
		entries = append(entries, Entry{Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	err := c.AddEntries(ctx, "s", entries, ExistOK)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 6 || !errors.Is(err, ErrSetFull) {
		t.Fatalf("AddEntries: %v, want 6 entries refused as full", err)
	}
	if out := ns.Run(t, "ipset", "list", "s"); !strings.Contains(out, "Number of entries: 4") {
		t.Errorf("the set does not hold the four that fitted:\n%s", out)
	}
}

// AddEntriesTo and DeleteEntriesFrom change the kernel's set as
// AddEntries and DeleteEntries do; the kernel refuses entries encoded for
// the family the caller gave when its set under that name has the other.
func TestHostEntriesOfKnownSet(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	s := Set{Name: "known", Type: HashIPPort, Family: inet.IPv4}
	if err := c.Create(ctx, s, Exclusive); err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		{Addr: netip.MustParseAddr("10.0.0.1"), Protocol: inet.TCP, Port: 80},
		{Addr: netip.MustParseAddr("10.0.0.2"), Protocol: inet.UDP, Port: 53},
	}
	if err := c.AddEntriesTo(ctx, s, entries, Exclusive); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteEntriesFrom(ctx, s, entries[:1], Exclusive); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "known", []string{"10.0.0.2,udp:53"})
	v6 := Set{Name: "v6", Type: HashIPPort, Family: inet.IPv6}
	if err := c.Create(ctx, v6, Exclusive); err != nil {
		t.Fatal(err)
	}
	err := c.AddEntriesTo(ctx, Set{Name: "v6", Type: HashIPPort, Family: inet.IPv4}, entries[:1], Exclusive)
	if err == nil || !strings.Contains(err.Error(), "v6") {
		t.Errorf("IPv4 entries into an IPv6 set: %v", err)
	}
	crossCheck(t, ns, c, "v6", nil)
}
