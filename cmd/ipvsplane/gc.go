package main

import (
	"os"
	"runtime/debug"
	"sync"
)

// firstSyncGCPercent is the garbage collector's GOGC while the daemon
// lists the cluster and programs the kernel the first time. That start
// is the daemon's peak: the listing's decoded objects, the tracker's
// converted copy, the desired kernel state and the first plan are alive
// at once, and with the default GOGC of 100 the heap may grow to twice
// that before a collection. At 25 it grows by a quarter, for more
// collections during the first sync only (measured: see README,
// Benchmarking).
const firstSyncGCPercent = 25

// lowerGCUntilSynced sets firstSyncGCPercent, unless the operator chose
// a GOGC, and returns the function that sets back the previous value and
// returns the first sync's garbage to the system; it does so once.
func lowerGCUntilSynced() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(firstSyncGCPercent)
	return sync.OnceFunc(func() {
		debug.SetGCPercent(prev)
		debug.FreeOSMemory()
	})
}
