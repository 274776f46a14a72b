// Package daemontest runs `ipvsplane run` for the daemon's VM tests
// (daemon/cmd/ipvsplane's, on manifests in a node namespace, and
// daemon/e2e's, following the API server): the process, its output, its
// first sync and its stop, alike for both.
package daemontest

import (
	"os/exec"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// Daemon is a running `ipvsplane run`.
type Daemon struct {
	Proc *testutil.Proc
	// Out is what it wrote to standard output and standard error.
	Out testutil.LockedBuffer
	// StateFile is its --state-file, written after each sync.
	StateFile string
}

// Start starts cmd, an `ipvsplane run` with --state-file stateFile, in ns
// (nil: the test's own namespace), its output going to Out. Stopping it
// when the test ends is the caller's, with whatever else its cleanup
// does.
func Start(cmd *exec.Cmd, ns *testutil.NetNS, stateFile string) (*Daemon, error) {
	d := &Daemon{StateFile: stateFile}
	cmd.Stdout, cmd.Stderr = &d.Out, &d.Out
	var err error
	if d.Proc, err = testutil.StartProc(cmd, ns); err != nil {
		return nil, err
	}
	return d, nil
}

// Stop sends SIGTERM and waits for the daemon to exit, killing it after
// a minute, and returns how it exited. It may be called again.
func (d *Daemon) Stop() error { return d.Proc.Stop(time.Minute) }

// WaitSynced waits for the daemon's first sync (its state file) and
// returns how long that took; it fails the test if the daemon exits or
// does not sync within timeout.
func (d *Daemon) WaitSynced(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	took, err := d.Proc.WaitFile(d.StateFile, timeout)
	if err != nil {
		t.Fatalf("the daemon's first sync: %v\n%s", err, d.Out.String())
	}
	return took
}
