package main

import (
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
		gc := firstSyncGCSettings()
		if got := debug.SetGCPercent(80); got != 80 {
			t.Errorf("GOGC=%q: while listing %d, want 80", tt.gogc, got)
		}
		gc.listed()
		gc.listed()
		if got := debug.SetGCPercent(-1); got != tt.during {
			t.Errorf("GOGC=%q: during the first sync %d, want %d", tt.gogc, got, tt.during)
		}
		debug.SetGCPercent(tt.during)
		gc.synced()
		gc.synced()
		if got := debug.SetGCPercent(orig); got != tt.set {
			t.Errorf("GOGC=%q: after %d, want %d", tt.gogc, got, tt.set)
		}
	}
}
