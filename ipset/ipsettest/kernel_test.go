package ipsettest_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
)

// dialFake returns a new fake kernel and a Conn to it, closed when the
// test ends.
func dialFake(t *testing.T) (*ipsettest.Kernel, *ipset.Conn) {
	t.Helper()
	k := ipsettest.New(nil)
	c := k.Dial()
	t.Cleanup(func() { c.Close() })
	return k, c
}

// HasIndex answers by the index Conn.Index reads, and a destroyed set's
// index is free.
func TestHasIndex(t *testing.T) {
	ctx := context.Background()
	k, c := dialFake(t)
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, ipset.Set{Name: name, Type: ipset.HashIP}, 0); err != nil {
			t.Fatal(err)
		}
	}
	b, err := c.Index(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !k.HasIndex(b) || k.HasIndex(b+1) {
		t.Errorf("HasIndex(%d) = %v, HasIndex(%d) = %v; want true, false", b, k.HasIndex(b), b+1, k.HasIndex(b+1))
	}
	if err := c.Destroy(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if k.HasIndex(b) {
		t.Errorf("HasIndex(%d) after the set was destroyed", b)
	}
}

// A large set keeps the order entries were added in through deletes and
// re-adds, its count, and its lookups, a network tested by a host
// address among them (the fake once scanned the set for every entry).
func TestLargeSetOrder(t *testing.T) {
	ctx := context.Background()
	_, c := dialFake(t)
	if err := c.Create(ctx, ipset.Set{Name: "big", Type: ipset.HashNet}, 0); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	entries := make([]ipset.Entry, n)
	for i := range entries {
		entries[i] = ipset.Entry{Net: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)}
	}
	if err := c.AddEntries(ctx, "big", entries, 0); err != nil {
		t.Fatal(err)
	}
	var odd, want []ipset.Entry
	for i, e := range entries {
		if i%2 == 1 {
			odd = append(odd, e)
		} else {
			want = append(want, e)
		}
	}
	if err := c.DeleteEntries(ctx, "big", odd, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, "big", odd[0], 0); err != nil {
		t.Fatal(err)
	}
	want = append(want, odd[0])
	h, got, err := c.List(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if h.Entries != uint32(len(want)) || !slices.Equal(got, want) {
		t.Fatalf("listed %d entries (header %d), want %d in the order added; first %v", len(got), h.Entries, len(want), got[:min(3, len(got))])
	}
	for _, tt := range []struct {
		e    ipset.Entry
		want bool
	}{
		{ipset.Entry{Net: netip.MustParsePrefix("10.0.2.7/32")}, true},  // in 10.0.2.0/24
		{ipset.Entry{Net: netip.MustParsePrefix("10.0.3.7/32")}, false}, // 10.0.3.0/24 was deleted
		{odd[0], true},
		{odd[1], false},
	} {
		if in, err := c.Test(ctx, "big", tt.e); err != nil || in != tt.want {
			t.Errorf("Test(%v) = %v, %v; want %v", tt.e.Net, in, err, tt.want)
		}
	}
	if err := c.Add(ctx, "big", want[0], 0); !errors.Is(err, ipset.ErrEntryExist) {
		t.Errorf("adding an entry twice: %v, want ErrEntryExist", err)
	}
}

// The first entry deleted leaves the listing, and the one after it moves
// up (a hole at index 0 looks like an index at first sight).
func TestDeletedFirstEntry(t *testing.T) {
	ctx := context.Background()
	_, c := dialFake(t)
	if err := c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP}, 0); err != nil {
		t.Fatal(err)
	}
	a, b := ipset.Entry{Addr: netip.MustParseAddr("10.0.0.1")}, ipset.Entry{Addr: netip.MustParseAddr("10.0.0.2")}
	if err := c.AddEntries(ctx, "s", []ipset.Entry{a, b}, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "s", a, 0); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.List(ctx, "s"); err != nil || !slices.Equal(got, []ipset.Entry{b}) {
		t.Errorf("List = %v, %v; want [%v]", got, err, b.Addr)
	}
}

// With small socket buffers a bulk add is cut into many writes, and every
// acknowledgement is still collected.
func TestSmallBuffers(t *testing.T) {
	ctx := context.Background()
	c := ipsettest.New(&ipsettest.Options{ReadBuffer: 64 << 10, WriteBuffer: 4 << 10}).Dial()
	defer c.Close()
	if err := c.Create(ctx, ipset.Set{Name: "s", Type: ipset.HashIP}, 0); err != nil {
		t.Fatal(err)
	}
	var entries []ipset.Entry
	for i := range 5000 {
		entries = append(entries, ipset.Entry{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})})
	}
	if err := c.AddEntries(ctx, "s", entries, 0); err != nil {
		t.Fatal(err)
	}
	_, got, err := c.List(ctx, "s")
	if err != nil || len(got) != len(entries) {
		t.Fatalf("%d entries, %v; want %d", len(got), err, len(entries))
	}
}
