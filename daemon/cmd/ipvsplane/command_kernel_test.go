//go:build vmtest || hosttest

package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// ipvsplane runs the test binary as the ipvsplane command inside ns (see
// TestMain) and returns its combined output.
func ipvsplane(t testing.TB, ns *testutil.NetNS, args ...string) (string, error) {
	t.Helper()
	cmd := command(t, ns, args...)
	var out testutil.LockedBuffer
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
