//go:build vmharness

// Package stuck is a guest test for vmtest's own test of a run that never
// ends (TestStuckGuestNamesItself): it is in testdata/, so no ./... pattern
// runs it, and its build tag, vmharness, keeps it out of every other build.
package stuck

import (
	"runtime"
	"testing"
)

// TestSpinsForever spins on one P without a preemption point: with
// GODEBUG=asyncpreemptoff=1 not even the test binary's own timeout fires,
// as in a wedged test, so only vmtest can end the run. The harness's test
// looks for this file's lines 20 (the log) and 22 (the loop) in its
// output, so they stay where they are.
func TestSpinsForever(t *testing.T) {
	runtime.GOMAXPROCS(1)
	t.Log("spinning")
	//lint:ignore SA5002 spinning is the point
	for {
	}
}
