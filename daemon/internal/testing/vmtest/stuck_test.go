//go:build vmharness

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// A guest whose test spins forever, so that not even the test's own
// timeout fires, is ended by vmtest within its limit, and by a signal at
// once; either way vmtest names the running test, quotes the guest's last
// lines, exits non-zero and leaves no qemu holding its output open (go
// test waited on one for good). It boots a VM: its build tag, vmharness,
// keeps it to make test-vmtest.
func TestStuckGuestNamesItself(t *testing.T) {
	t.Parallel()
	dir, vmtest, guestTest := buildStuck(t)

	t.Run("limit", func(t *testing.T) {
		out, took, err := runStuck(t, dir, vmtest, guestTest, spinning, nil)
		if took < 50*time.Second || took > 50*time.Second+limitDumpGrace+10*time.Second {
			t.Errorf("the run took %v, want its limit of 50 s and at most the dump's grace", took)
		}
		wantStopped(t, out, err, "vmtest: stuck.test: stopped: its limit of 50s passed")
		// The test's goroutine dump, with the spinning line.
		for _, want := range []string{"SIGQUIT: quit", "stuck_test.go:22"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks the test's goroutine dump (%q):\n%s", want, out)
			}
		}
		// Before it, the spinning test at the head of the guest's busiest
		// processes, and the kernel's backtrace of the CPU.
		busiest := regexp.MustCompile(`vmtest: the guest's busiest processes.*\n.*vmtest: +[0-9.]+ s  R +[0-9]+  stuck.test\n`)
		if !busiest.MatchString(out) {
			t.Errorf("the output does not name the spinning test as the guest's busiest process:\n%s", out)
		}
		if !strings.Contains(out, "NMI backtrace for cpu 0") {
			t.Errorf("the output lacks the kernel's backtrace of the CPU:\n%s", out)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		out, took, err := runStuck(t, dir, vmtest, guestTest, spinning, func(p *os.Process, out *testutil.LockedBuffer) {
			deadline := time.Now().Add(3 * time.Minute)
			for !strings.Contains(out.String(), "stuck_test.go:20: spinning") && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			_ = p.Signal(syscall.SIGTERM)
		})
		if took > 60*time.Second {
			t.Errorf("the run took %v after SIGTERM", took)
		}
		wantStopped(t, out, err, "vmtest: stuck.test: stopped: vmtest got terminated")
	})
}

// A guest that stops writing its heartbeat, as one whose CPUs locked up
// with interrupts off does (nothing in it can then say a word), gets an
// NMI once its silence limit passes; its kernel panics on it with the
// interrupted CPU's backtrace, and the test runs again in a fresh guest,
// as after any panic, three times in all. It boots three VMs: its build
// tag, vmharness, keeps it to make test-vmtest.
func TestSilentGuestGetsAnNMI(t *testing.T) {
	// Beside the stuck guest: each guest has one vCPU of the two cores.
	t.Parallel()
	dir, vmtest, guestTest := buildStuck(t)

	out, took, err := runStuck(t, dir, vmtest, guestTest, guestRun{
		args: []string{"-test.run=^TestStopsHeartbeat$", "-test.timeout=10m"},
		env:  []string{"VMTEST_SILENCE=15s"},
	}, nil)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Errorf("vmtest ended with %v, want a non-zero exit status", err)
	}
	// Each attempt: a boot, 15 s of silence, the panic.
	if took > 5*time.Minute {
		t.Errorf("the run took %v", took)
	}
	for _, want := range []string{
		"silent_test.go:30: heartbeat stopped",
		"vmtest: the guest wrote no heartbeat in the 15s since its last: it is stuck in its kernel; sending it an NMI",
		"Uhhuh. NMI received for unknown reason",
		"Kernel panic - not syncing: NMI: Not continuing",
		"running stuck.test again in a fresh guest (attempt 3 of 3)",
		"vmtest: stuck.test: the guest kernel panicked",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// buildStuck builds vmtest and testdata/stuck's guest tests into a
// directory of their own, which it returns with their paths.
func buildStuck(t *testing.T) (dir, vmtest, guestTest string) {
	t.Helper()
	dir = t.TempDir()
	vmtest, guestTest = filepath.Join(dir, "vmtest"), filepath.Join(dir, "stuck.test")
	goCommand(t, "build", "-o", vmtest, ".")
	goCommand(t, "test", "-c", "-tags", "vmharness", "-o", guestTest, "./testdata/stuck")
	return dir, vmtest, guestTest
}

// goCommand runs the go command with args in the package's directory.
func goCommand(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// guestRun is a run of one of the guest tests in testdata/stuck: its
// arguments and environment.
type guestRun struct{ args, env []string }

// spinning runs the test that spins forever. -test.timeout=20s: go test
// would kill vmtest after 80 s, and vmtest's limit is 50 s, time enough
// for a loaded machine to boot the guest and start the test. The test's
// own timeout never fires (asyncpreemptoff).
var spinning = guestRun{
	args: []string{"-test.run=^TestSpinsForever$", "-test.timeout=20s"},
	env:  []string{"GODEBUG=asyncpreemptoff=1"},
}

// runStuck runs one of guestTest's tests under vmtest as go test would,
// its output in a pipe, with the work directory in dir; during calls
// during the run. It returns the output, how long the run took and how it
// ended.
func runStuck(t *testing.T, dir, vmtest, guestTest string, run guestRun, during func(*os.Process, *testutil.LockedBuffer)) (string, time.Duration, error) {
	t.Helper()
	cmd := exec.Command(vmtest, append([]string{guestTest, "-test.v=true"}, run.args...)...)
	cmd.Dir = "testdata/stuck"
	cmd.Env = append(os.Environ(), "VMTEST_CPUS=1", "VMTEST_TIMEOUT=",
		// qemu's command line names the initramfs in it.
		"TMPDIR="+dir)
	cmd.Env = append(cmd.Env, run.env...)
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// What go test gives a test binary's output once it has exited.
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(cmd.Process, &out)
	}
	err := cmd.Wait()
	took := time.Since(start)
	if errors.Is(err, exec.ErrWaitDelay) {
		t.Errorf("vmtest's output stayed open after it exited")
	}
	if left := processesNaming(t, dir); len(left) > 0 {
		t.Errorf("left running: %q", left)
	}
	return out.String(), took, err
}

// wantStopped checks that the run failed with stopped and named the
// spinning test and its last lines.
func wantStopped(t *testing.T, out string, err error, stopped string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Errorf("vmtest ended with %v, want a non-zero exit status", err)
	}
	for _, want := range []string{
		stopped,
		"vmtest: running TestSpinsForever\n",
		"vmtest: the guest's last lines:\n",
		"vmtest: | === RUN   TestSpinsForever\nvmtest: |     stuck_test.go:20: spinning\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// processesNaming returns the command lines of the processes that name
// dir in theirs.
func processesNaming(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			found = append(found, string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return found
}
