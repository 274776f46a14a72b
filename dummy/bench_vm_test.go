//go:build vmtest

package dummy

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// serviceIPs returns n IPv4 addresses from 10.96.0.0/12, as cluster IPs.
func serviceIPs(n int) []netip.Addr {
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], 0x0a600000+uint32(i))
		addrs[i] = netip.AddrFrom4(a)
	}
	return addrs
}

// Binding n IPv4 service addresses with one BindAll, on an empty device
// of a fresh namespace: as addresses (kube-proxy's way, the baseline),
// whose every insertion walks the device's address list, then as local
// routes. unbind-ms is the UnbindAll of all of them that follows.
//
//	IPVSPLANE_BENCH_SERVICES=1000,10000,100000 make bench PKGS=./dummy/ BENCH=BindAll
func BenchmarkBindAll(b *testing.B) {
	testutil.RequireVM(b)
	for _, n := range testutil.BenchSizes(b, 1<<20, 1000, 10000) {
		addrs := serviceIPs(n)
		b.Run(fmt.Sprintf("addrs=%d", n), func(b *testing.B) {
			b.Run("addresses", func(b *testing.B) { benchBind(b, BindAddresses, addrs) })
			b.Run("local-routes", func(b *testing.B) { benchBind(b, BindLocalRoutes, addrs) })
		})
	}
}

func benchBind(b *testing.B, mode Binding, addrs []netip.Addr) {
	ctx := context.Background()
	var unbind time.Duration
	for range b.N {
		b.StopTimer()
		ns := testutil.NewNetNS(b)
		c, err := Dial(&Config{NetNS: ns.FD(), Binding: mode})
		if err != nil {
			b.Fatal(err)
		}
		dev, err := c.Ensure(ctx, device)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		err = dev.BindAll(ctx, addrs)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if got, err := dev.Addresses(ctx); err != nil || len(got) != len(addrs) {
			b.Fatalf("%d bound, %v; want %d", len(got), err, len(addrs))
		}
		start := time.Now()
		err = dev.UnbindAll(ctx, addrs)
		unbind += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx, device); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.ReportMetric(float64(unbind.Microseconds())/float64(b.N)/1000, "unbind-ms")
}
