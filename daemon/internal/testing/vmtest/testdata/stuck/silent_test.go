//go:build vmharness

package stuck

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopsHeartbeat stops the guest's heartbeat (SIGSTOP to the init's
// loop) and waits, as a guest whose CPUs locked up for good falls silent:
// vmtest's own test of that (TestSilentGuestGetsAnNMI) sees the guest
// sent an NMI, panic on it, and run the test again.
func TestStopsHeartbeat(t *testing.T) {
	pid, err := os.ReadFile("/run/vmtest-heartbeat.pid")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Log("heartbeat stopped")
	time.Sleep(time.Hour)
}
