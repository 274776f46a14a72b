package main

import (
	"os"
	"runtime/debug"
	"sync"
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

// firstSyncGC holds the garbage collector's settings around the first
// sync.
type firstSyncGC struct {
	// listed returns the listing's garbage to the system, which the
	// runtime would otherwise keep resident beside the pages the first
	// sync takes, and lowers GOGC for the first sync.
	listed func()
	// synced sets back the previous GOGC and returns the first sync's
	// garbage to the system. Both do their work once.
	synced func()
}

// firstSyncGCSettings returns the settings, which do nothing when the
// operator chose a GOGC.
func firstSyncGCSettings() firstSyncGC {
	if os.Getenv("GOGC") != "" {
		return firstSyncGC{listed: func() {}, synced: func() {}}
	}
	var prev int
	listed := sync.OnceFunc(func() {
		debug.FreeOSMemory()
		prev = debug.SetGCPercent(firstSyncGCPercent)
	})
	return firstSyncGC{
		listed: listed,
		synced: sync.OnceFunc(func() {
			listed()
			debug.SetGCPercent(prev)
			debug.FreeOSMemory()
		}),
	}
}
