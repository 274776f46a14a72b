//go:build hosttest || vmtest

package ipset

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// ipPortEntries makes n distinct hash:ip,port entries; offset shifts them
// so that two lists differ.
func ipPortEntries(n, offset int) []Entry {
	return testutil.Keys(n, offset, func(k netip.AddrPort) Entry { return Entry{Addr: k.Addr(), Protocol: inet.TCP, Port: k.Port()} })
}

func TestHostLargeSet(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	const n = 100000
	s := Set{Name: "big", Type: HashIPPort, MaxElem: 2 * n}
	if err := c.Create(ctx, s, Exclusive); err != nil {
		t.Fatal(err)
	}
	entries := ipPortEntries(n, 0)
	if err := c.AddEntries(ctx, "big", entries, Exclusive); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "big", entryStrings(entries))

	// Change 1%: a thousand entries go, a thousand new ones come.
	desired := append(entries[1000:n:n], ipPortEntries(1000, n)...)
	plan, err := c.Sync(ctx, "big", desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Add) != 1000 || len(plan.Delete) != 1000 {
		t.Errorf("Sync: %d adds, %d deletes; want 1000 each", len(plan.Add), len(plan.Delete))
	}
	crossCheck(t, ns, c, "big", entryStrings(desired))
	plan, err = c.Sync(ctx, "big", desired)
	if err != nil || len(plan.Add)+len(plan.Delete) != 0 {
		t.Errorf("second Sync: %+v, %v; want nothing to do", plan, err)
	}

	// Apply the way back, without a dump.
	back := Diff(desired, entries)
	if err := c.Apply(ctx, "big", back); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "big", entryStrings(entries))
	if err := c.Apply(ctx, "nope", back); !errors.Is(err, ErrSetNotExist) {
		t.Errorf("Apply to a missing set: %v", err)
	}
	desired = entries

	if err := c.DeleteEntries(ctx, "big", desired, Exclusive); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, "big", nil)
}

func TestHostReplace(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	s := Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, MaxElem: 200000}
	// Replace creates a missing set.
	first := ipPortEntries(3, 0)
	if err := c.Replace(ctx, s, first); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, s.Name, entryStrings(first))
	idx, err := c.Index(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	second := ipPortEntries(5, 100)
	if err := c.Replace(ctx, s, second); err != nil {
		t.Fatal(err)
	}
	crossCheck(t, ns, c, s.Name, entryStrings(second))
	// Rules refer to the set by index; a replace keeps it.
	if after, err := c.Index(ctx, s.Name); err != nil || after != idx {
		t.Errorf("index %d before, %d after (%v)", idx, after, err)
	}
	if out := strings.TrimSpace(ns.Run(t, "ipset", "list", "-n")); out != s.Name {
		t.Errorf("sets after Replace: %q; the temporary set must go", out)
	}
	// A failing entry leaves the set as it was.
	bad := append(ipPortEntries(2, 500), Entry{Addr: netip.MustParseAddr("fd00::1"), Protocol: inet.TCP, Port: 1})
	if err := c.Replace(ctx, s, bad); !errors.Is(err, ErrEntryInvalid) {
		t.Errorf("Replace with an IPv6 entry: %v", err)
	}
	crossCheck(t, ns, c, s.Name, entryStrings(second))
	// The set's type must match.
	if err := c.Replace(ctx, Set{Name: s.Name, Type: HashIP}, nil); !errors.Is(err, ErrTypeMismatch) {
		t.Errorf("Replace with another type: %v", err)
	}
}

// TestHostReplaceIsAtomic reads a set in a loop from a second socket while
// it is replaced back and forth between two large lists: every read sees one
// list or the other, never a mix or a partial set.
func TestHostReplaceIsAtomic(t *testing.T) {
	ns, c := dialNS(t)
	ctx := testutil.Context(t)
	const n = 20000
	s := Set{Name: "atomic", Type: HashIPPort, MaxElem: 2 * n}
	lists := [][]Entry{ipPortEntries(n, 0), ipPortEntries(n/2, 3*n)}
	if err := c.Replace(ctx, s, lists[0]); err != nil {
		t.Fatal(err)
	}
	reader := dialIn(t, ns)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var reads int
	var readErr error
	wg.Go(func() {
		for rctx.Err() == nil {
			_, got, err := reader.List(rctx, s.Name)
			if err != nil {
				if rctx.Err() == nil {
					readErr = err
				}
				return
			}
			if err := sameAsOneOf(got, lists); err != nil {
				readErr = fmt.Errorf("read %d: %w", reads, err)
				return
			}
			reads++
		}
	})
	for i := 1; i <= 20; i++ {
		if err := c.Replace(ctx, s, lists[i%2]); err != nil {
			t.Error(err)
			break
		}
	}
	stop()
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if reads == 0 {
		t.Fatal("the reader read nothing")
	}
	t.Logf("%d concurrent reads, all whole", reads)
	crossCheck(t, ns, c, s.Name, entryStrings(lists[0]))
}

func sameAsOneOf(got []Entry, lists [][]Entry) error {
	for _, list := range lists {
		if len(got) != len(list) {
			continue
		}
		want := make(map[key]bool, len(list))
		for _, e := range list {
			want[e.key()] = true
		}
		for _, e := range got {
			if !want[e.key()] {
				return fmt.Errorf("entry %s of a %d-entry read is not in the list of that size", e, len(got))
			}
		}
		return nil
	}
	return fmt.Errorf("read %d entries; the lists have %d and %d", len(got), len(lists[0]), len(lists[1]))
}

// TestHostSaveRoundTrip saves sets with the real ipset, parses the file and
// loads it into another namespace with Replace: ipset save there prints
// the same entries.
func TestHostSaveRoundTrip(t *testing.T) {
	src, _ := dialNS(t)
	script := strings.Join([]string{
		"create a hash:ip,port family inet hashsize 1024 maxelem 65536 comment",
		`add a 10.0.0.1,tcp:80 comment "svc a"`,
		"add a 10.0.0.2,udp:53",
		"create b hash:net,port family inet6 hashsize 2048 maxelem 1000",
		"add b fd00::/64,tcp:443",
		"create c bitmap:port range 30000-32767 counters",
		"add c 30001 packets 1 bytes 2",
		"",
	}, "\n")
	loadScript(t, src, script)
	saved := src.Run(t, "ipset", "save")
	sets, err := ParseSave(strings.NewReader(saved))
	if err != nil {
		t.Fatal(err)
	}
	dst := testutil.NewNetNS(t)
	c := dialIn(t, dst)
	ctx := testutil.Context(t)
	for _, s := range sets {
		if err := c.Replace(ctx, s.Set, s.Entries); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		srcCreate, srcAdds := ipsetSave(t, src, name)
		dstCreate, dstAdds := ipsetSave(t, dst, name)
		trim := func(s string) string { before, _, _ := strings.Cut(s, " initval"); return before }
		if trim(srcCreate) != trim(dstCreate) || strings.Join(srcAdds, "\n") != strings.Join(dstAdds, "\n") {
			t.Errorf("set %s\nsaved:  %s %q\nloaded: %s %q", name, srcCreate, srcAdds, dstCreate, dstAdds)
		}
	}
}

// loadScript feeds a restore script to the real ipset inside ns.
func loadScript(t *testing.T, ns *testutil.NetNS, script string) {
	t.Helper()
	if err := ns.Do(func() error { return runWithStdin(script, "ipset", "restore") }); err != nil {
		t.Fatal(err)
	}
}
