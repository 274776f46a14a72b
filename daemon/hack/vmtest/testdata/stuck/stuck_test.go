// Package stuck is a guest test for vmtest's own test of a run that never
// ends (TestStuckGuestNamesItself): it is in testdata/, so no ./... pattern
// runs it, and its test spins only when the harness asks.
package stuck

import (
	"os"
	"runtime"
	"testing"
)

// TestSpinsForever spins on one P without a preemption point: with
// GODEBUG=asyncpreemptoff=1 not even the test binary's own timeout fires,
// as in a wedged test, so only vmtest can end the run.
func TestSpinsForever(t *testing.T) {
	if os.Getenv("IPVSPLANE_VMTEST_SPIN") != "1" {
		t.Skip("spins forever; vmtest's TestStuckGuestNamesItself runs it")
	}
	runtime.GOMAXPROCS(1)
	t.Log("spinning")
	//lint:ignore SA5002 spinning is the point
	for {
	}
}
