package dataplane

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// heapMiB is the live heap after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// The memory the dataplane keeps for a first sync of n services, without
// a kernel: the desired state, the plan, and the programmed state once
// every operation succeeded. They are all alive at the end of the first
// sync, the daemon's peak.
func BenchmarkFirstSyncMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(n, 10)}
			for b.Loop() {
				base := heapMiB()
				p := planner.NewPlanner(nftrules.Render)
				p.Update(state)
				desired, owners := p.Desired()
				planned := heapMiB()
				pl := planner.Diff(planner.DiffInputs{Observed: plan.NewKernelState(), Desired: desired, Services: owners, Scope: planner.FullScope})
				diffed := heapMiB()
				programmed := plan.NewKernelState()
				for op := range pl.All() {
					programmed.Record(op)
				}
				recorded := heapMiB()
				b.ReportMetric(planned-base, "desired-MiB")
				b.ReportMetric(diffed-planned, "plan-MiB")
				b.ReportMetric(recorded-diffed, "programmed-MiB")
				b.ReportMetric(float64(pl.Len()), "plan-ops")
				runtime.KeepAlive(p)
				runtime.KeepAlive(pl)
				runtime.KeepAlive(programmed)
			}
		})
	}
}

// A full compare of a kernel that holds what it should, as the sync after
// each periodic reread makes: it must find nothing, cheaply.
func BenchmarkFullCompare(b *testing.B) {
	state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(10000, 10)}
	p := planner.NewPlanner(nftrules.Render)
	p.Update(state)
	desired, owners := p.Desired()
	programmed := plan.NewKernelState()
	for op := range planner.Diff(planner.DiffInputs{Observed: programmed, Desired: desired, Services: owners, Scope: planner.FullScope}).All() {
		programmed.Record(op)
	}
	for b.Loop() {
		if pl := planner.Diff(planner.DiffInputs{Observed: programmed, Desired: desired, Services: owners, Scope: planner.FullScope}); pl.Len() != 0 {
			b.Fatalf("%d operations", pl.Len())
		}
	}
}
