//go:build hosttest

package conntrack_test

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	vnl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// BenchmarkDelete10kOf100k deletes the 10,000 UDP entries to one of 10
// destinations from a table of 100,000: the conntrack program first (the
// baseline, process start included), then vishvananda/netlink's
// ConntrackDeleteFilters (dump all, filter in Go, delete one by one), then
// this package.
func BenchmarkDelete10kOf100k(b *testing.B) {
	const total, dests = 100000, 10
	target := testutil.SpreadService(3)
	b.Run("conntrack-D", func(b *testing.B) {
		testutil.RequireProgram(b, "conntrack")
		benchDelete(b, total, dests, func(ns *testutil.NetNS) int {
			if _, err := ns.Output(context.Background(), "conntrack", "-D", "-p", "udp", "--orig-dst", target.String()); err != nil {
				b.Fatal(err)
			}
			return total / dests
		}, false)
	})
	b.Run("vishvananda", func(b *testing.B) {
		benchDelete(b, total, dests, func(ns *testutil.NetNS) int {
			h, err := vnl.NewHandleAt(netns.NsHandle(ns.FD()), unix.NETLINK_NETFILTER)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			f := &vnl.ConntrackFilter{}
			if err := f.AddIP(vnl.ConntrackOrigDstIP, net.IP(target.AsSlice())); err != nil {
				b.Fatal(err)
			}
			if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
				b.Fatal(err)
			}
			n, err := h.ConntrackDeleteFilters(vnl.ConntrackTable, unix.AF_INET, f)
			if err != nil {
				b.Fatal(err)
			}
			return int(n)
		}, true)
	})
	b.Run("ipvsplane", func(b *testing.B) {
		benchDelete(b, total, dests, func(ns *testutil.NetNS) int {
			return deleteWithPackage(b, ns, conntrack.ByDestination(inet.UDP, target, 0))
		}, true)
	})
}

// BenchmarkDeleteTableSize deletes the 2,000 entries to one destination
// from tables of growing size: with the kernel filtering the dump, time and
// memory follow the matches, not the table.
func BenchmarkDeleteTableSize(b *testing.B) {
	const matches = 2000
	target := testutil.SpreadService(3)
	for _, total := range []int{20000, 100000} {
		b.Run("table-"+strconv.Itoa(total), func(b *testing.B) {
			benchDelete(b, total, total/matches, func(ns *testutil.NetNS) int {
				return deleteWithPackage(b, ns, conntrack.ByDestination(inet.UDP, target, 0))
			}, true)
		})
	}
}

func deleteWithPackage(b *testing.B, ns *testutil.NetNS, f conntrack.Filter) int {
	c, err := conntrack.Dial(&conntrack.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	n, err := c.DeleteMatching(context.Background(), f)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// benchDelete fills a fresh namespace with total entries over dests
// destinations and times del, which must remove the total/dests entries to
// testutil.SpreadService(3); between iterations, untimed, they are put back.
// With measure, it reports the peak growth of the Go heap during del.
func benchDelete(b *testing.B, total, dests int, del func(*testutil.NetNS) int, measure bool) {
	ns := testutil.NewNetNS(b)
	testutil.EnsureConntrackMax(b, ns, 2*total)
	c, err := conntrack.Dial(&conntrack.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	flows := testutil.Spread(total, dests, func(client netip.AddrPort, dst netip.Addr) conntrack.Flow {
		return conntrack.Flow{Orig: conntrack.Tuple{Src: client.Addr(), Dst: dst, Protocol: inet.UDP, SrcPort: client.Port(), DstPort: 53}, Timeout: 10 * time.Minute}
	})
	if err := c.Create(ctx, flows...); err != nil {
		b.Fatal(err)
	}
	var victims []conntrack.Flow
	for _, f := range flows {
		if f.Orig.Dst == testutil.SpreadService(3) {
			victims = append(victims, f)
		}
	}
	var peak uint64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if i > 0 {
			if err := c.Create(ctx, victims...); err != nil {
				b.Fatal(err)
			}
		}
		var stop func() uint64
		if measure {
			stop = heapPeak()
		}
		b.StartTimer()
		n := del(ns)
		b.StopTimer()
		if measure {
			peak = max(peak, stop())
		}
		if n != len(victims) {
			b.Fatalf("deleted %d entries, want %d", n, len(victims))
		}
		if left, err := c.Count(ctx, conntrack.All()); err != nil || left != total-len(victims) {
			b.Fatalf("%d entries left (%v), want %d", left, err, total-len(victims))
		}
	}
	if measure {
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	}
}

// heapPeak samples the live Go heap until the returned function is called,
// which reports the largest growth over the heap at the start.
func heapPeak() func() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var mu sync.Mutex
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	})
	return func() uint64 {
		v := read()
		close(done)
		wg.Wait()
		return max(peak, v) - base
	}
}
