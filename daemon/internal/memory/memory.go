// Package memory holds the daemon's garbage-collector settings: a low
// GOGC while the first sync programs the kernel, its peak, and a soft
// memory limit that follows the live heap.
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
// programs the kernel the first time, from its first prefill (while the
// listing goes on) to the end of its first sync. That is the daemon's
// peak: the tracker's converted objects, the desired kernel state, the
// plans and the programmed state are alive at once, and with the default
// GOGC of 100 the heap may grow to twice that before a collection. At 10
// it grows by a tenth, for more collections then only. Before the first
// prefill the default stays: the watcher hands each object on as it is
// decoded, so the heap stays small (measured: see docs/benchmarks.md;
// at 10,000 services the default through the prefills cost 1.45x the
// peak RSS and saved a fifth of the CPU).
const firstSyncGCPercent = 10

// FirstSyncGC holds the garbage collector's settings around the first
// sync.
type FirstSyncGC struct {
	listed, synced func()
}

// Listed returns the garbage of the listing so far to the system, which
// the runtime would otherwise keep resident beside the pages the first
// programming takes, and lowers GOGC for it; the daemon calls it at its
// first prefill or, without one, its first sync. It does its work once.
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

// AfterSync does the collector's work after the daemon's syncs: once,
// after the first, FirstSyncGC.Synced; after each full one,
// SoftLimit.AfterFullSync. The first's runs on a goroutine of its own, so
// that the changes that come meanwhile are not held behind it: returning
// the first sync's garbage to the system forces a collection of the whole
// heap and gives back every free page: at 44,000 services under
// emulation the next sync began 6.1 s after a restart's first with this
// work in the way, 3.8 s without (docs/benchmarks.md, "Where ipvsplane's
// churn tail comes from").
type AfterSync struct {
	gc    FirstSyncGC
	limit *SoftLimit

	mu sync.Mutex
	// settling is true while the first sync's work runs, settled once it
	// is done; full records a full sync among those it stands for.
	settling, settled, full bool
}

// NewAfterSync returns the work after syncs with these settings.
func NewAfterSync(gc FirstSyncGC, limit *SoftLimit) *AfterSync {
	return &AfterSync{gc: gc, limit: limit}
}

// Synced does, or starts, the work after a successful sync; full says
// whether the sync was a full one. A full sync while the first's work is
// under way has its limit applied when that work ends, which the limit
// must follow.
func (a *AfterSync) Synced(full bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case !a.settling && !a.settled:
		a.settling, a.full = true, full
		go a.settleFirst()
	case a.settling:
		a.full = a.full || full
	case full:
		a.limit.AfterFullSync()
	}
}

func (a *AfterSync) settleFirst() {
	a.gc.Synced()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settling, a.settled = false, true
	if a.full {
		a.limit.AfterFullSync()
	}
}

// heapHeadroom is the automatic soft memory limit's room for the heap
// to grow between collections, as a share of the live heap. The default
// GOGC gives it 1.0; half of that collects twice as often, which at the
// daemon's rate of allocation under churn stays a few percent of a CPU,
// and keeps the heap well under its size during the first sync.
const heapHeadroom = 0.5

// minHeapHeadroom is the least room the limit leaves for the heap to grow,
// so that a small cluster's heap is not collected every few allocations.
const minHeapHeadroom = 8 << 20

// SoftLimit keeps the daemon's memory near what it needs, however long it
// runs: with the default GOGC the heap may grow to twice the live data
// between collections, and under churn it does (a 10,000-service soak
// grew from 85 to 148 MiB). The runtime's soft limit makes it collect,
// and return freed pages, before that. After each full sync the limit is
// set to the memory outside the heap's objects (stacks, the runtime's own
// data, fragmentation) plus the live heap plus heapHeadroom of it. It
// follows both as they grow: a limit fixed at the first sync leaves less
// and less room for the heap as the memory beside it grows, until the
// collector runs without pause (measured: docs/benchmarks.md).
type SoftLimit struct {
	// auto is false when the operator chose the limit.
	auto bool
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

// AfterFullSync sets the automatic limit; the first call must come after
// the first sync's garbage was returned to the system.
func (m *SoftLimit) AfterFullSync() {
	if m.auto {
		debug.SetMemoryLimit(automaticLimit(readMemory()))
	}
}

// automaticLimit is the soft limit for the memory u.
func automaticLimit(u memoryUse) int64 {
	return u.beside + u.live + max(int64(float64(u.live)*heapHeadroom), minHeapHeadroom)
}

// memoryUse is the part of the runtime's memory the soft limit bounds.
type memoryUse struct {
	// beside is the memory the runtime holds outside the heap's objects
	// and its free pages: stacks, its own data, the unused space in the
	// heap's spans.
	beside int64
	// live is the heap the last collection found live.
	live int64
}

// readMemory reads the runtime's memory classes.
func readMemory() memoryUse {
	samples := []runtimemetrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	runtimemetrics.Read(samples)
	v := func(i int) int64 { return int64(samples[i].Value.Uint64()) }
	return memoryUse{beside: max(v(0)-v(1)-v(2)-v(3), 0), live: v(4)}
}
