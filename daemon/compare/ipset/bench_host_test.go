//go:build hosttest

package ipset_test

import (
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipset"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The load benchmarks fill an empty hash:ip,port set, created with the same
// options for every method, in a fresh namespace per method: `ipset restore`
// from a file (the baseline, process start included), vishvananda/netlink
// one message per entry, AddEntries, and Replace.

func BenchmarkLoad20000(b *testing.B)  { benchmarkLoad(b, 20000) }
func BenchmarkLoad100000(b *testing.B) { benchmarkLoad(b, 100000) }

// benchSet is the set every method fills: sized as ipset.Replace sizes
// its sets (a bucket per 4 entries, a power of two of at least 1024), so
// that the kernel does not grow the table while it is filled.
func benchSet(n int) ipset.Set {
	hashSize := max(1024, 1<<bits.Len(uint(max(n/4, 1)-1)))
	return ipset.Set{Name: "KUBE-NODE-PORT", Type: ipset.HashIPPort, HashSize: uint32(hashSize), MaxElem: uint32(2 * n)}
}

// ipPortEntries makes n distinct hash:ip,port entries; offset shifts them
// so that two lists differ.
func ipPortEntries(n, offset int) []ipset.Entry {
	return testutil.Keys(n, offset, func(k netip.AddrPort) ipset.Entry {
		return ipset.Entry{Addr: k.Addr(), Protocol: inet.TCP, Port: k.Port()}
	})
}

func benchmarkLoad(b *testing.B, n int) {
	entries := ipPortEntries(n, 0)
	s := benchSet(n)
	b.Run("ipset-restore", func(b *testing.B) {
		ns, c := benchNS(b)
		file := filepath.Join(b.TempDir(), "restore")
		var script strings.Builder
		for _, e := range entries {
			fmt.Fprintf(&script, "add %s %s\n", s.Name, e)
		}
		if err := os.WriteFile(file, []byte(script.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		runLoads(b, c, s, n, func() error {
			return ns.Do(func() error {
				out, err := exec.Command("ipset", "restore", "-f", file).CombinedOutput()
				if err != nil {
					return fmt.Errorf("ipset restore: %w: %s", err, out)
				}
				return nil
			})
		})
	})
	b.Run("vishvananda", func(b *testing.B) {
		ns, c := benchNS(b)
		var h *vnl.Handle
		if err := ns.Do(func() (err error) {
			h, err = vnl.NewHandle(unix.NETLINK_NETFILTER)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		ventries := make([]*vnl.IPSetEntry, n)
		for i, e := range entries {
			proto, port := uint8(e.Protocol), e.Port
			ventries[i] = &vnl.IPSetEntry{IP: net.IP(e.Addr.AsSlice()), Protocol: &proto, Port: &port}
		}
		runLoads(b, c, s, n, func() error {
			for _, e := range ventries {
				if err := h.IpsetAdd(s.Name, e); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("bulk", func(b *testing.B) {
		_, c := benchNS(b)
		runLoads(b, c, s, n, func() error { return c.AddEntries(b.Context(), s.Name, entries, ipset.ExistOK) })
	})
	b.Run("replace", func(b *testing.B) {
		_, c := benchNS(b)
		runLoads(b, c, s, n, func() error { return c.Replace(b.Context(), s, entries) })
	})
}

func benchNS(b *testing.B) (*testutil.NetNS, *ipset.Conn) {
	ns := testutil.NewNetNS(b)
	testutil.RequireProgram(b, "ipset")
	return ns, testutil.Open(b, func() (*ipset.Conn, error) { return ipset.Dial(&ipset.Config{NetNS: ns.FD()}) })
}

// runLoads times load into an empty set, b.N times, and checks the set.
func runLoads(b *testing.B, c *ipset.Conn, s ipset.Set, n int, load func() error) {
	ctx := b.Context()
	for b.Loop() {
		b.StopTimer()
		if err := c.Create(ctx, s, ipset.ExistOK); err != nil {
			b.Fatal(err)
		}
		if err := c.Flush(ctx, s.Name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := load(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	h, err := c.Header(ctx, s.Name)
	if err != nil || int(h.Entries) != n {
		b.Fatalf("set holds %d entries (%v), want %d", h.Entries, err, n)
	}
	b.ReportMetric(float64(n), "entries/op")
}

// BenchmarkSync100000 changes 1% of a 100,000-entry set: a full reload
// (Replace, the baseline) against Sync, which dumps the set once, computes
// the difference and sends the thousand deletions and thousand additions,
// and against Apply of that difference when the caller already knows it
// (no dump).
func BenchmarkSync100000(b *testing.B) {
	const n = 100000
	s := benchSet(n)
	// Two lists a 1% change apart, used alternately.
	lists := [2][]ipset.Entry{ipPortEntries(n, 0), append(ipPortEntries(n, 0)[n/100:], ipPortEntries(n/100, n)...)}
	b.Run("reload", func(b *testing.B) {
		_, c := benchNS(b)
		runSyncs(b, c, s, lists, func(list []ipset.Entry) error { return c.Replace(b.Context(), s, list) })
	})
	b.Run("sync-1pct", func(b *testing.B) {
		_, c := benchNS(b)
		runSyncs(b, c, s, lists, func(list []ipset.Entry) error {
			plan, err := c.Sync(b.Context(), s.Name, list)
			if err == nil && len(plan.Add)+len(plan.Delete) != 2*n/100 {
				err = fmt.Errorf("sync changed %d entries", len(plan.Add)+len(plan.Delete))
			}
			return err
		})
	})
	b.Run("apply-1pct", func(b *testing.B) {
		_, c := benchNS(b)
		// plans[i] turns the other list into lists[i].
		plans := [2]ipset.Plan{ipset.Diff(lists[1], lists[0]), ipset.Diff(lists[0], lists[1])}
		runSyncs(b, c, s, lists, func(list []ipset.Entry) error {
			if &list[0] == &lists[0][0] {
				return c.Apply(b.Context(), s.Name, plans[0])
			}
			return c.Apply(b.Context(), s.Name, plans[1])
		})
	})
}

// runSyncs starts from lists[0] and applies the lists alternately. One
// untimed round trip first measures the steady state, not a cold start.
func runSyncs(b *testing.B, c *ipset.Conn, s ipset.Set, lists [2][]ipset.Entry, apply func([]ipset.Entry) error) {
	if err := c.Replace(b.Context(), s, lists[0]); err != nil {
		b.Fatal(err)
	}
	for _, list := range [][]ipset.Entry{lists[1], lists[0]} {
		if err := apply(list); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		if err := apply(lists[i%2]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	h, err := c.Header(b.Context(), s.Name)
	if err != nil || int(h.Entries) != len(lists[i%2]) {
		b.Fatalf("set holds %d entries (%v), want %d", h.Entries, err, len(lists[i%2]))
	}
	b.ReportMetric(float64(len(lists[0])), "entries/op")
}
