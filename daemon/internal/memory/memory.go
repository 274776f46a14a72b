// Package memory holds the daemon's garbage-collector settings: a low
// GOGC while the first sync programs the kernel, its peak, and a soft
// memory limit that keeps the daemon near what that sync left.
package memory

import (
	"fmt"
	"os"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// firstSyncGCPercent is the garbage collector's GOGC while the daemon
// programs the kernel the first time. That is the daemon's peak: the
// tracker's converted objects, the desired kernel state, the first plan
// and the programmed state are alive at once, and with the default GOGC
// of 100 the heap may grow to twice that before a collection. At 10 it
// grows by a tenth, for more collections during the first sync only. The
// listing before it keeps the default: the watcher hands each object on
// as it is decoded, so the heap stays small, and a low GOGC there only
// costs time (measured: see docs/benchmarks.md).
const firstSyncGCPercent = 10

// FirstSyncGC holds the garbage collector's settings around the first
// sync.
type FirstSyncGC struct {
	listed, synced func()
}

// Listed returns the listing's garbage to the system, which the runtime
// would otherwise keep resident beside the pages the first sync takes,
// and lowers GOGC for the first sync. It does its work once.
func (g FirstSyncGC) Listed() { g.listed() }

// Synced sets back the previous GOGC and returns the first sync's
// garbage to the system, after doing Listed's work if it was not done.
// It does its work once.
func (g FirstSyncGC) Synced() { g.synced() }

// NewFirstSyncGC returns the settings, which do nothing when the operator
// chose a GOGC.
func NewFirstSyncGC() FirstSyncGC {
	if os.Getenv("GOGC") != "" {
		return FirstSyncGC{listed: func() {}, synced: func() {}}
	}
	var prev int
	listed := sync.OnceFunc(func() {
		debug.FreeOSMemory()
		prev = debug.SetGCPercent(firstSyncGCPercent)
	})
	return FirstSyncGC{
		listed: listed,
		synced: sync.OnceFunc(func() {
			listed()
			debug.SetGCPercent(prev)
			debug.FreeOSMemory()
		}),
	}
}

// memoryHeadroom is the automatic soft memory limit's margin over the
// memory in use right after the first sync.
const memoryHeadroom = 1.1

// SoftLimit keeps the daemon's memory near what its first sync
// left, however long it runs: with the default GOGC the heap may grow to
// twice the live data between collections, and under churn it does (a
// 10,000-service soak grew from 85 to 148 MiB). The runtime's soft limit
// makes it collect, and return freed pages, before that. The limit is set
// after the first sync to memoryHeadroom times the memory then in use,
// and raised after each full sync by as much as the live heap grew, so a
// growing cluster does not make the collector run without pause.
type SoftLimit struct {
	// auto is false when the operator chose the limit.
	auto  bool
	limit int64
	// overhead is the memory in use after the first sync beyond the live
	// heap: the runtime, stacks, the binary's data.
	overhead int64
}

// NewSoftLimit applies --memory-limit: empty for the automatic
// limit, "0" for none, else a quantity. GOMEMLIMIT, if set, wins.
func NewSoftLimit(flag string) (*SoftLimit, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return &SoftLimit{}, nil
	}
	if flag == "" {
		return &SoftLimit{auto: true}, nil
	}
	q, err := resource.ParseQuantity(flag)
	if err != nil || q.Sign() < 0 {
		return nil, fmt.Errorf("--memory-limit %q: want a quantity such as 256Mi, or 0 for none", flag)
	}
	if q.Value() > 0 {
		debug.SetMemoryLimit(q.Value())
	}
	return &SoftLimit{}, nil
}

// AfterFullSync sets or raises the automatic limit; the first call must
// come after the first sync's garbage was returned to the system.
func (m *SoftLimit) AfterFullSync() {
	if !m.auto {
		return
	}
	inUse, live := memoryInUse()
	if m.limit == 0 {
		m.overhead = max(inUse-live, 0)
		m.limit = int64(float64(inUse) * memoryHeadroom)
	} else {
		m.limit = max(m.limit, int64(float64(m.overhead+live)*memoryHeadroom))
	}
	debug.SetMemoryLimit(m.limit)
}

// memoryInUse returns the memory the runtime holds and has not returned
// to the system, which the soft limit bounds, and the live heap as of
// the last collection.
func memoryInUse() (inUse, live int64) {
	samples := []runtimemetrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	runtimemetrics.Read(samples)
	v := func(i int) int64 { return int64(samples[i].Value.Uint64()) }
	return v(0) - v(1), v(2)
}
