//go:build vmtest || hosttest

package main

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// lockedBuffer collects a process's output from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ipvsplane runs the test binary as the ipvsplane command inside ns (see
// TestMain) and returns its combined output.
func ipvsplane(t testing.TB, ns *testutil.NetNS, args ...string) (string, error) {
	t.Helper()
	cmd := command(t, ns, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := ns.Do(cmd.Start)
	if err == nil {
		err = cmd.Wait()
	}
	return out.String(), err
}

func command(t testing.TB, ns *testutil.NetNS, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), runAsCommand+"=1")
	return cmd
}
