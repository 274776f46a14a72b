package main

import (
	"os"
	"runtime/debug"
	"sync"
)

// firstSyncGCPercent is the garbage collector's GOGC while the daemon
// lists the cluster and programs the kernel the first time. That start
// is the daemon's peak: the tracker's converted objects, the desired
// kernel state, the first plan and the programmed state are alive at
// once, and with the default GOGC of 100 the heap may grow to twice that
// before a collection. At 10 it grows by a tenth, for more collections
// during the first sync only (measured: see README, Benchmarking).
const firstSyncGCPercent = 10

// firstSyncGC holds the garbage collector's settings for the first sync.
type firstSyncGC struct {
	// listed returns the listing's garbage to the system before the
	// first sync starts: the runtime would otherwise keep those pages
	// resident beside the ones the sync takes.
	listed func()
	// synced sets back the previous GOGC and returns the first sync's
	// garbage to the system; it does so once.
	synced func()
}

// lowerGCUntilSynced sets firstSyncGCPercent, unless the operator chose
// a GOGC.
func lowerGCUntilSynced() firstSyncGC {
	if os.Getenv("GOGC") != "" {
		return firstSyncGC{listed: func() {}, synced: func() {}}
	}
	prev := debug.SetGCPercent(firstSyncGCPercent)
	return firstSyncGC{
		listed: debug.FreeOSMemory,
		synced: sync.OnceFunc(func() {
			debug.SetGCPercent(prev)
			debug.FreeOSMemory()
		}),
	}
}
