package memory

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFirstSyncGCSettings(t *testing.T) {
	tests := []struct {
		gogc        string
		during, set int
	}{
		{"", firstSyncGCPercent, 80},
		{"150", 80, 80}, // the operator's GOGC is left alone
	}
	for _, tt := range tests {
		t.Setenv("GOGC", tt.gogc)
		orig := debug.SetGCPercent(80)
		gc := NewFirstSyncGC()
		if got := debug.SetGCPercent(80); got != 80 {
			t.Errorf("GOGC=%q: while listing %d, want 80", tt.gogc, got)
		}
		gc.Listed()
		gc.Listed()
		if got := debug.SetGCPercent(-1); got != tt.during {
			t.Errorf("GOGC=%q: during the first sync %d, want %d", tt.gogc, got, tt.during)
		}
		debug.SetGCPercent(tt.during)
		gc.Synced()
		gc.Synced()
		if got := debug.SetGCPercent(orig); got != tt.set {
			t.Errorf("GOGC=%q: after %d, want %d", tt.gogc, got, tt.set)
		}
	}
}

func TestSoftMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "")

	if _, err := NewSoftLimit("lots"); err == nil {
		t.Error("--memory-limit lots was accepted")
	}
	if _, err := NewSoftLimit("-1Mi"); err == nil {
		t.Error("a negative --memory-limit was accepted")
	}
	m, err := NewSoftLimit("256Mi")
	if err != nil {
		t.Fatal(err)
	}
	m.AfterFullSync()
	if got := debug.SetMemoryLimit(-1); got != 256<<20 {
		t.Errorf("--memory-limit 256Mi set %d", got)
	}

	// No limit, as at a start without GOMEMLIMIT (an earlier test's
	// limit could equal the one computed here).
	debug.SetMemoryLimit(math.MaxInt64)
	m, err = NewSoftLimit("")
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("the automatic limit was set before the first sync: %d", got)
	}
	m.AfterFullSync()
	first := debug.SetMemoryLimit(-1)
	inUse, _ := memoryInUse()
	if first == math.MaxInt64 || first < inUse {
		t.Errorf("after the first sync the limit is %d with %d in use", first, inUse)
	}
	// A later full sync never lowers it, and a live heap that grew
	// raises it.
	grown := make([]byte, 4*first)
	runtime.GC()
	m.AfterFullSync()
	if got := debug.SetMemoryLimit(-1); got <= first {
		t.Errorf("a live heap grown to %d left the limit at %d (was %d)", len(grown), got, first)
	}
	runtime.KeepAlive(grown)
}
