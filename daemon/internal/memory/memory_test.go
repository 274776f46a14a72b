package memory

import (
	"math"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"testing"
	"time"
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
	u := readMemory()
	if first == math.MaxInt64 || first < u.beside+u.live+minHeapHeadroom {
		t.Errorf("after the first sync the limit is %d with %d live and %d beside", first, u.live, u.beside)
	}
	// A live heap that grew by 64 MiB raises it by as much and half again,
	// less the floor it had, and one that shrank lowers it.
	grown := make([]byte, 64<<20)
	runtime.GC()
	m.AfterFullSync()
	raised := debug.SetMemoryLimit(-1)
	if raised < first+88<<20 {
		t.Errorf("a live heap grown by %d raised the limit from %d to %d", len(grown), first, raised)
	}
	runtime.KeepAlive(grown)
	runtime.GC()
	m.AfterFullSync()
	if got := debug.SetMemoryLimit(-1); got > raised-64<<20 {
		t.Errorf("a live heap shrunk by %d left the limit at %d (was %d)", len(grown), got, raised)
	}
}

func TestAutomaticLimit(t *testing.T) {
	tests := []struct {
		use  memoryUse
		want int64
	}{
		{memoryUse{beside: 10 << 20, live: 4 << 20}, 22 << 20},    // a small heap gets the floor
		{memoryUse{beside: 20 << 20, live: 100 << 20}, 170 << 20}, // a large one half again
	}
	for _, tt := range tests {
		if got := automaticLimit(tt.use); got != tt.want {
			t.Errorf("automaticLimit(%+v) = %d, want %d", tt.use, got, tt.want)
		}
	}
}

// readSetting reads a setting of the collector's without changing it.
func readSetting(name string) uint64 {
	s := []runtimemetrics.Sample{{Name: name}}
	runtimemetrics.Read(s)
	return s[0].Value.Uint64()
}

func TestAfterSync(t *testing.T) {
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	prevGC := debug.SetGCPercent(80)
	t.Cleanup(func() {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevGC)
	})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	limit, err := NewSoftLimit("")
	if err != nil {
		t.Fatal(err)
	}
	gc := NewFirstSyncGC()
	gc.Listed()
	a := NewAfterSync(gc, limit)

	// The first sync's work runs apart; a full sync meanwhile is merged
	// into it, and whichever came first, GOGC is set back and the limit
	// applied once it is done.
	a.Synced(false)
	a.Synced(true)
	deadline := time.Now().Add(time.Minute)
	for readSetting("/gc/gogc:percent") != 80 || readSetting("/gc/gomemlimit:bytes") == math.MaxInt64 {
		if time.Now().After(deadline) {
			t.Fatalf("after the first sync: GOGC %d, limit %d", readSetting("/gc/gogc:percent"), readSetting("/gc/gomemlimit:bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// After it, a full sync applies the limit at once, and another sync
	// leaves it be.
	debug.SetMemoryLimit(math.MaxInt64)
	a.Synced(false)
	if got := readSetting("/gc/gomemlimit:bytes"); got != math.MaxInt64 {
		t.Errorf("a sync that was not full set the limit to %d", got)
	}
	a.Synced(true)
	if got := readSetting("/gc/gomemlimit:bytes"); got == math.MaxInt64 {
		t.Error("a full sync after the first did not set the limit")
	}
}
