package ipset_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
	"golang.org/x/sys/unix"
)

// These tests run the real Conn on ipsettest's fake kernel.

// The kernel's ipset errnos the tests expect (enum ipset_errno and the
// type-specific ones).
const (
	errBusy         unix.Errno = 4100
	errExistSetName unix.Errno = 4101
	errTypeMismatch unix.Errno = 4102
	errExist        unix.Errno = 4103
	errHashFull     unix.Errno = 4352
	errBitmapRange  unix.Errno = 4352
)

func dial(t *testing.T) (*ipsettest.Kernel, *ipset.Conn) {
	t.Helper()
	k := ipsettest.New(nil)
	c := k.Dial()
	t.Cleanup(func() { c.Close() })
	return k, c
}

func ipPort(a string, p inet.Protocol, port uint16) ipset.Entry {
	return ipset.Entry{Addr: netip.MustParseAddr(a), Protocol: p, Port: port}
}

// must fails the test at the first error of a setup step.
func must(t *testing.T, errs ...error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("setup step %d: %v", i, err)
		}
	}
}

func TestErrorsMatchSentinelsAndErrno(t *testing.T) {
	ctx := context.Background()
	hashIPPort := ipset.Set{Name: "s", Type: ipset.HashIPPort}
	e := ipPort("1.1.1.1", inet.TCP, 1)
	tests := []struct {
		name     string
		call     func(t *testing.T, k *ipsettest.Kernel, c *ipset.Conn) error
		sentinel error
		errno    unix.Errno
	}{
		{"destroy missing", func(_ *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error { return c.Destroy(ctx, "s") },
			ipset.ErrSetNotExist, unix.ENOENT},
		{"create existing", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, hashIPPort, ipset.Exclusive))
			return c.Create(ctx, hashIPPort, ipset.Exclusive)
		}, ipset.ErrSetExist, unix.EEXIST},
		{"create existing otherwise", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, hashIPPort, ipset.Exclusive))
			return c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIPPort, MaxElem: 5}, ipset.ExistOK)
		}, ipset.ErrSetExist, unix.EEXIST},
		{"rename onto existing", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, ipset.Set{Name: "a", Type: ipset.HashIP}, ipset.Exclusive),
				c.Create(ctx, ipset.Set{Name: "b", Type: ipset.HashIP}, ipset.Exclusive))
			return c.Rename(ctx, "a", "b")
		}, ipset.ErrSetExist, errExistSetName},
		{"swap mismatched", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, ipset.Set{Name: "a", Type: ipset.HashIP}, ipset.Exclusive),
				c.Create(ctx, ipset.Set{Name: "b", Type: ipset.HashNet}, ipset.Exclusive))
			return c.Swap(ctx, "a", "b")
		}, ipset.ErrTypeMismatch, errTypeMismatch},
		{"destroy referenced", func(t *testing.T, k *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, ipset.Set{Name: "a", Type: ipset.HashIP}, ipset.Exclusive), k.SetReferences("a", 1))
			return c.Destroy(ctx, "a")
		}, ipset.ErrSetInUse, errBusy},
		{"add existing", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, hashIPPort, ipset.Exclusive), c.Add(ctx, "s", e, ipset.Exclusive))
			return c.Add(ctx, "s", e, ipset.Exclusive)
		}, ipset.ErrEntryExist, errExist},
		{"delete missing", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, hashIPPort, ipset.Exclusive))
			return c.Delete(ctx, "s", e, ipset.Exclusive)
		}, ipset.ErrEntryNotExist, errExist},
		{"add to full hash", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIPPort, MaxElem: 1}, ipset.Exclusive),
				c.Add(ctx, "s", e, ipset.Exclusive))
			return c.Add(ctx, "s", ipPort("1.1.1.2", inet.TCP, 1), ipset.ExistOK)
		}, ipset.ErrSetFull, errHashFull},
		{"add out of bitmap range", func(t *testing.T, _ *ipsettest.Kernel, c *ipset.Conn) error {
			must(t, c.Create(ctx, ipset.Set{Name: "s", Type: ipset.BitmapPort, PortFrom: 10, PortTo: 20}, ipset.Exclusive))
			return c.Add(ctx, "s", ipset.Entry{Port: 9}, ipset.ExistOK)
		}, ipset.ErrEntryOutOfRange, errBitmapRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, c := dial(t)
			err := tt.call(t, k, c)
			if !errors.Is(err, tt.sentinel) || !errors.Is(err, tt.errno) {
				t.Errorf("error %v: want %v and errno %d", err, tt.sentinel, int(tt.errno))
			}
			var oerr *ipset.OpError
			if !errors.As(err, &oerr) || oerr.Object == "" {
				t.Errorf("error %#v names no set", err)
			}
		})
	}
}

// With ExistOK, adding what is there and deleting what is not succeed,
// and an add updates the entry's extensions.
func TestExistOK(t *testing.T) {
	ctx := context.Background()
	k, c := dial(t)
	must(t, c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP, Timeout: time.Minute, Comment: true}, ipset.Exclusive),
		c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP, Timeout: time.Minute, Comment: true}, ipset.ExistOK))
	e := ipset.Entry{Addr: netip.MustParseAddr("10.0.0.1"), Comment: "old"}
	must(t, c.Add(ctx, "s", e, ipset.Exclusive))
	e.Comment, e.Timeout = "new", ipset.Permanent
	must(t, c.Add(ctx, "s", e, ipset.ExistOK),
		c.Delete(ctx, "s", ipset.Entry{Addr: netip.MustParseAddr("10.0.0.9")}, ipset.ExistOK))
	_, got, err := c.List(ctx, "s")
	if err != nil || len(got) != 1 || got[0].Comment != "new" || got[0].Timeout != ipset.Permanent {
		t.Fatalf("List: %v, %v; want the updated entry\n%s", got, err, k.Dump())
	}
}

func TestTestMembership(t *testing.T) {
	ctx := context.Background()
	_, c := dial(t)
	must(t, c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIPPort}, ipset.Exclusive),
		c.Create(ctx, ipset.Set{Name: "nets", Type: ipset.HashNet}, ipset.Exclusive),
		c.Add(ctx, "s", ipPort("1.1.1.1", inet.TCP, 1), ipset.Exclusive),
		c.Add(ctx, "nets", ipset.Entry{Net: netip.MustParsePrefix("10.1.2.3/16")}, ipset.Exclusive))
	tests := []struct {
		set   string
		entry ipset.Entry
		want  bool
	}{
		{"s", ipPort("1.1.1.1", inet.TCP, 1), true},
		{"s", ipPort("1.1.1.1", inet.UDP, 1), false},
		{"nets", ipset.Entry{Net: netip.MustParsePrefix("10.1.200.1/32")}, true},
		{"nets", ipset.Entry{Net: netip.MustParsePrefix("10.1.0.0/16")}, true},
		{"nets", ipset.Entry{Net: netip.MustParsePrefix("10.1.0.0/24")}, false},
		{"nets", ipset.Entry{Net: netip.MustParsePrefix("10.2.0.1/32")}, false},
	}
	for _, tt := range tests {
		got, err := c.Test(ctx, tt.set, tt.entry)
		if err != nil || got != tt.want {
			t.Errorf("Test %s %v = %v, %v; want %v", tt.set, tt.entry, got, err, tt.want)
		}
	}
}

// A bulk add stops at each failed entry; the Conn reports it by index
// and sends the rest again, so every other entry is added.
func TestBulkFailures(t *testing.T) {
	ctx := context.Background()
	k, c := dial(t)
	must(t, c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIPPort}, ipset.Exclusive),
		c.Add(ctx, "s", ipPort("10.0.0.5", inet.TCP, 80), ipset.Exclusive))
	var entries []ipset.Entry
	for i := range 2000 {
		entries = append(entries, ipPort(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String(), inet.TCP, 80))
	}
	err := c.AddEntries(ctx, "s", entries, ipset.Exclusive)
	var be *ipset.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 5 || be.Total != 2000 || !errors.Is(err, ipset.ErrEntryExist) {
		t.Fatalf("AddEntries: %v, want entry 5 to exist", err)
	}
	if _, got, _ := k.Set("s"); len(got) != 2000 {
		t.Fatalf("%d entries in the set, want 2000", len(got))
	}
	_, listed, err := c.List(ctx, "s")
	if err != nil || len(listed) != 2000 {
		t.Fatalf("List: %d entries, %v", len(listed), err)
	}
}

// Replace builds a set under a temporary name and swaps it in: the rules
// using the set keep it, and the old contents go.
func TestReplaceKeepsReferences(t *testing.T) {
	ctx := context.Background()
	k, c := dial(t)
	s := ipset.Set{Name: "svc", Type: ipset.HashIPPort}
	must(t, c.Create(ctx, s, ipset.Exclusive), c.Add(ctx, "svc", ipPort("10.0.0.1", inet.TCP, 80), ipset.Exclusive),
		k.SetReferences("svc", 2))
	want := []ipset.Entry{ipPort("10.0.0.2", inet.UDP, 53), ipPort("10.0.0.3", inet.TCP, 443)}
	must(t, c.Replace(ctx, s, want))
	h, got, ok := k.Set("svc")
	if !ok || h.References != 2 || !slices.Equal(got, want) {
		t.Fatalf("after Replace: %+v %v\n%s", h, got, k.Dump())
	}
	if names := k.Names(); !slices.Equal(names, []string{"svc"}) {
		t.Errorf("sets %v, want the temporary one gone", names)
	}
	if err := c.Rename(ctx, "svc", "other"); !errors.Is(err, ipset.ErrSetInUse) {
		t.Errorf("renaming a referenced set: %v", err)
	}
}

// Names, Header and Index read what was created; a destroyed set's index
// goes to the next set created.
func TestListing(t *testing.T) {
	ctx := context.Background()
	_, c := dial(t)
	must(t, c.Create(ctx, ipset.Set{Name: "a", Type: ipset.HashIP}, ipset.Exclusive),
		c.Create(ctx, ipset.Set{Name: "b", Type: ipset.BitmapPort, PortFrom: 1, PortTo: 1024}, ipset.Exclusive),
		c.Destroy(ctx, "a"),
		c.Create(ctx, ipset.Set{Name: "c", Type: ipset.HashNet, Family: inet.IPv6, HashSize: 100}, ipset.Exclusive))
	names, err := c.Names(ctx)
	if err != nil || !slices.Equal(names, []string{"c", "b"}) {
		t.Fatalf("Names: %v, %v", names, err)
	}
	if idx, err := c.Index(ctx, "c"); err != nil || idx != 0 {
		t.Errorf("Index c: %d, %v; want the freed 0", idx, err)
	}
	h, err := c.Header(ctx, "c")
	if err != nil || h.Type != ipset.HashNet || h.Family != inet.IPv6 {
		t.Errorf("Header c: %+v, %v", h, err)
	}
	h, _, err = c.List(ctx, "c")
	if err != nil || h.HashSize != 128 || h.MaxElem != 65536 {
		t.Errorf("List c: %+v, %v; want hashsize 128 and maxelem 65536", h, err)
	}
}

func TestCancelledContext(t *testing.T) {
	_, c := dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Flush(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush with a cancelled context: %v", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	_, c := dial(t)
	ctx := context.Background()
	long := "0123456789012345678901234567890123"
	for name, err := range map[string]error{
		"empty name":   c.Flush(ctx, ""),
		"long name":    c.Destroy(ctx, long),
		"unknown type": c.Create(ctx, ipset.Set{Name: "s", Type: "list:set"}, ipset.Exclusive),
		"bad family":   c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP, Family: 7}, ipset.Exclusive),
		"bad range":    c.Create(ctx, ipset.Set{Name: "s", Type: ipset.BitmapPort, PortFrom: 9, PortTo: 1}, ipset.Exclusive),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Once a set is full, the entries after the one it refused are reported
// full without being sent one round trip each.
func TestAddEntriesStopsAtFullSet(t *testing.T) {
	ctx := context.Background()
	_, c := dial(t)
	if err := c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP, MaxElem: 4}, ipset.Exclusive); err != nil {
		t.Fatal(err)
	}
	var entries []ipset.Entry
	for i := range 10 {
		entries = append(entries, ipset.Entry{Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	adds := 0
	counting := fault.With(ctx, func(_, req string) error {
		if req == "add" {
			adds++
		}
		return nil
	})
	err := c.AddEntries(counting, "s", entries, ipset.ExistOK)
	var be *ipset.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 6 {
		t.Fatalf("AddEntries: %v, want 6 entries refused", err)
	}
	for i, f := range be.Failed {
		if !errors.Is(f, ipset.ErrSetFull) || f.Index != 4+i {
			t.Errorf("failure %d: %v at %d, want entry %d refused as full", i, f, f.Index, 4+i)
		}
	}
	if adds != 1 {
		t.Errorf("%d add messages, want 1: the entries after the full set's refusal were sent again", adds)
	}
}

// AddEntriesTo and DeleteEntriesFrom take the set's type and family from
// the caller: each is its bulk messages alone, without the header request
// AddEntries and DeleteEntries make first.
func TestEntriesOfKnownSet(t *testing.T) {
	ctx := context.Background()
	_, c := dial(t)
	s := ipset.Set{Name: "s", Type: ipset.HashIPPort, Family: inet.IPv4}
	if err := c.Create(ctx, s, ipset.Exclusive); err != nil {
		t.Fatal(err)
	}
	entries := []ipset.Entry{
		{Addr: netip.MustParseAddr("10.0.0.1"), Protocol: inet.TCP, Port: 80},
		{Addr: netip.MustParseAddr("10.0.0.2"), Protocol: inet.UDP, Port: 53},
	}
	var requests []string
	counting := fault.With(ctx, func(_, req string) error {
		requests = append(requests, req)
		return nil
	})
	if err := c.AddEntriesTo(counting, s, entries, ipset.Exclusive); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.List(ctx, "s"); err != nil || len(got) != 2 {
		t.Fatalf("List after AddEntriesTo: %v, %v", got, err)
	}
	if err := c.DeleteEntriesFrom(counting, s, entries[:1], ipset.Exclusive); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.List(ctx, "s"); err != nil || len(got) != 1 || got[0] != entries[1] {
		t.Fatalf("List after DeleteEntriesFrom: %v, %v", got, err)
	}
	if !slices.Equal(requests, []string{"add", "delete"}) {
		t.Errorf("requests %q, want one add and one delete", requests)
	}
	// Without a type, the set's is asked for, as AddEntries does.
	requests = nil
	if err := c.AddEntriesTo(counting, ipset.Set{Name: "s"}, entries[:1], ipset.ExistOK); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(requests, []string{"header", "add"}) {
		t.Errorf("requests %q for a set without a type, want a header and an add", requests)
	}
	// The entries are checked against the type and family given.
	err := c.AddEntriesTo(ctx, s, []ipset.Entry{{Addr: netip.MustParseAddr("2001:db8::1"), Protocol: inet.TCP, Port: 80}}, ipset.ExistOK)
	if !errors.Is(err, ipset.ErrEntryInvalid) {
		t.Errorf("an IPv6 entry for an IPv4 set: %v", err)
	}
}
