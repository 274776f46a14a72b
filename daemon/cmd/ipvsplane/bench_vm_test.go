//go:build vmtest

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// perFile is how many services a manifest file holds; a change rewrites
// one file, so its cost does not grow with the number of services.
const perFile = 10

// BenchmarkDaemon runs the daemon, as its own process, binding the service
// IPs as local routes, on manifests of
// services x 10 endpoints (IPVSPLANE_BENCH_SERVICES, default 1,000 and 10,000) (ClusterIP services, 10 to a file): its initial sync from
// start to programmed kernel (ns/op), the sync alone (sync-s) and what
// came before it (read-s: the process's start and the manifests' reading), its peak
// resident memory, and the time from a manifest change (one endpoint of
// one service replaced) to the kernel (change-ms, the mean of 5).
func BenchmarkDaemon(b *testing.B) {
	testutil.RequireVM(b)
	for _, n := range testutil.BenchSizes(b, 1<<20-2, 1000, 10000) {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for range b.N {
				benchDaemon(b, n)
			}
		})
	}
}

func benchService(i int) string {
	return fmt.Sprintf("svc-%05d", i)
}

// benchVIP is service i's cluster IP, in 10.96.0.0/12.
func benchVIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96 + byte((i+1)>>16), byte((i + 1) >> 8), byte(i + 1)})
}

// benchManifest writes file f's services; endpoint 0 of service change
// gets the address from instead.
func benchManifest(n, f, change int, from netip.Addr) string {
	var sb strings.Builder
	for i := f; i < n; i += n / perFile {
		fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: bench}\nspec:\n  clusterIP: %s\n  ports: [{name: http, port: 80, targetPort: 8080}]\n",
			benchService(i), benchVIP(i))
		fmt.Fprintf(&sb, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-1\n  namespace: bench\n  labels: {kubernetes.io/service-name: %s}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n",
			benchService(i), benchService(i))
		for j := range 10 {
			addr := netip.AddrFrom4([4]byte{10, 244, byte(j), byte(i%250 + 1)})
			if i == change && j == 0 {
				addr = from
			}
			fmt.Fprintf(&sb, "- {addresses: [%s], nodeName: node-%d}\n", addr, j)
		}
	}
	return sb.String()
}

func benchDaemon(b *testing.B, n int) {
	b.StopTimer()
	ns := testutil.NewNetNS(b)
	dir := b.TempDir()
	files := n / perFile
	for f := range files {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("services-%04d.yaml", f)), benchManifest(n, f, -1, netip.Addr{}))
	}
	b.StartTimer()
	// Local routes: bound as addresses, the kernel's walk of the device's
	// address list takes minutes at 100,000 services (BenchmarkBindAll).
	d := startDaemon(b, ns, dir, "--ipvs-sync-period=1h", "--healthz-bind-address=", "--metrics-bind-address=",
		"--service-address-binding=local-route")
	ready := d.WaitSynced(b, 30*time.Minute)
	b.StopTimer()
	rec, err := status.ReadRecord(d.StateFile)
	if err != nil {
		b.Fatal(err)
	}
	if rec.ServicePorts != n || rec.ErrorCount != 0 {
		b.Fatalf("first sync: %d service ports, %d errors: %v", rec.ServicePorts, rec.ErrorCount, rec.Errors)
	}
	b.ReportMetric(rec.FirstSyncSeconds, "sync-s")
	b.ReportMetric(ready.Seconds()-rec.FirstSyncSeconds, "read-s")

	ic, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer ic.Close()
	ctx := context.Background()
	const changes = 5
	var total time.Duration
	for c := range changes {
		time.Sleep(1100 * time.Millisecond) // past minSyncPeriod
		svc := (c * 7919) % n
		from := netip.AddrFrom4([4]byte{10, 250, byte(c), 1})
		start := time.Now()
		writeFile(b, filepath.Join(dir, fmt.Sprintf("services-%04d.yaml", svc%files)), benchManifest(n, svc%files, svc, from))
		for {
			dests, err := ic.Destinations(ctx, ipvs.Service{Protocol: inet.TCP, Addr: benchVIP(svc), Port: 80})
			if err != nil {
				b.Fatal(err)
			}
			if containsDest(dests, from) {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("change %d not programmed within a minute", c)
			}
			time.Sleep(2 * time.Millisecond)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/changes, "change-ms")
	peak, err := peakRSS(d.Proc.Cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(peak, "peak-RSS-MiB")
	if err := d.Stop(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

func containsDest(dests []ipvs.Destination, addr netip.Addr) bool {
	for _, d := range dests {
		if d.Addr == addr && d.Weight > 0 {
			return true
		}
	}
	return false
}

// peakRSS reads a process's peak resident memory (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
