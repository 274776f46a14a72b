//go:build vmtest

package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kernelOps counts the kernel objects a plan touches: one per IPVS
// request (an AddReals makes one per real server), set entry, address and
// flush.
func kernelOps(p *plan.Plan) int {
	n := 0
	for op := range p.All() {
		switch o := op.(type) {
		case plan.AddEntries:
			n += len(o.Entries)
		case plan.DelEntries:
			n += len(o.Entries)
		case plan.AddReals:
			n += len(o.Reals)
		default:
			n++
		}
	}
	return n
}

// peakRSS is the process's peak resident set (VmHWM) in MiB.
func peakRSS() float64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// benchSizes returns the numbers of services a benchmark runs at
// (testutil.BenchSizes); the bench addresses stay distinct up to 838,860.
func benchSizes(b *testing.B, defaults ...int) []int {
	return testutil.BenchSizes(b, fixture.ClusterMost, defaults...)
}

// The first sync of a node in a cluster of n services, from an empty
// kernel, with the service addresses bound as kube-proxy binds them (the
// baseline) and as local routes.
func BenchmarkInitialSync(b *testing.B) {
	testutil.RequireVM(b)
	for _, n := range benchSizes(b, 1000, 10000, 50000) {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(n, 10)}
			for _, binding := range []dummy.Binding{dummy.BindAddresses, dummy.BindLocalRoutes} {
				b.Run(binding.String(), func(b *testing.B) { benchInitialSync(b, b, state, binding) })
			}
		})
	}
}

// benchInitialSync times first syncs of state, each in a fresh namespace
// that lives until owner's test ends. The kernel tears a namespace down in
// the background; BenchmarkFullSyncFloor makes the owner its group, so
// that no teardown runs while a later sub-benchmark is timed.
func benchInitialSync(b *testing.B, owner testing.TB, state *model.State, binding dummy.Binding) {
	var res *Result
	for range b.N {
		b.StopTimer()
		ns := testutil.NewNetNS(owner)
		d, err := New(&Config{NetNS: ns.FD(), Binding: binding})
		if err != nil {
			b.Fatal(err)
		}
		// IPVSPLANE_BENCH_PROFILE=1: a CPU profile of each first sync.
		stopProfile := testutil.CPUProfile(b, fmt.Sprintf("first-sync-%d-%s", len(state.Services), binding))
		b.StartTimer()
		res, err = d.Sync(context.Background(), state)
		b.StopTimer()
		stopProfile()
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Errors) > 0 {
			b.Fatalf("%d errors, first: %v", len(res.Errors), res.Errors[0])
		}
		b.ReportMetric(heapMiB(), "heap-MiB")
		d.Close()
	}
	b.ReportMetric(float64(res.Plan.Len()), "plan-ops")
	b.ReportMetric(float64(kernelOps(res.Plan)), "kernel-ops")
	b.ReportMetric(peakRSS(), "peak-RSS-MiB")
}

// One endpoint added to and removed from one service, at n services: the
// cost must not grow with n.
func BenchmarkEndpointChange(b *testing.B) {
	testutil.RequireVM(b)
	for _, n := range benchSizes(b, 100, 50000) {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ns := testutil.NewNetNS(b)
			// Local routes, so that the untimed first sync at 100,000
			// services does not walk the address list for minutes; a
			// change binds nothing.
			d, err := New(&Config{NetNS: ns.FD(), Binding: dummy.BindLocalRoutes})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(n, 10)}
			if _, err := d.Sync(context.Background(), state); err != nil {
				b.Fatal(err)
			}
			// A service without a node port at both sizes: one virtual server.
			target := &state.Services[n/2+1]
			extra := model.Endpoint{Addr: netip.MustParseAddr("10.200.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-z"}
			ops := 0
			change := func(i int) {
				if i%2 == 0 {
					target.Endpoints = append(target.Endpoints, extra)
				} else {
					target.Endpoints = target.Endpoints[:10]
				}
				res, err := d.SyncChanges(context.Background(), []model.Change{{Name: target.Name, Port: target}})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Errors) > 0 {
					b.Fatalf("%d errors, first: %v", len(res.Errors), res.Errors[0])
				}
				ops += kernelOps(res.Plan)
			}
			// One change and a collection first, so the initial sync's
			// garbage is not charged to the changes.
			change(0)
			change(1)
			runtime.GC()
			ops = 0
			// Each op is 20 changes: one is too short to time under
			// emulation.
			const perOp = 20
			b.ResetTimer()
			for i := range b.N * perOp {
				change(i)
			}
			b.ReportMetric(float64(ops)/float64(b.N*perOp), "kernel-ops/change")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*perOp)/1000, "ms/change")
		})
	}
}
