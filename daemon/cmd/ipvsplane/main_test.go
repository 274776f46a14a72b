package main

import (
	"os"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// TestMain runs the command itself when the tests start the test binary
// as ipvsplane (see ipvsplaneCommand), so the VM tests run the real
// daemon as a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv(runAsCommand) == "1" {
		os.Exit(execute(newApp(), os.Args[1:]))
	}
	testutil.MainWithLeakCheck(m)
}

// runAsCommand, set to 1 in the environment, makes the test binary
// ipvsplane.
const runAsCommand = "IPVSPLANE_TEST_RUN_COMMAND"
