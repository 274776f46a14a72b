package testutil

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// StrictEnv names the variable that, besides CI=true, turns a missing
// capability into a failure.
const StrictEnv = "IPVSPLANE_REQUIRE_KERNEL"

// VMEnv is set to 1 by the VM harness inside the guest.
const VMEnv = "IPVSPLANE_VM"

// Strict reports whether a missing capability must fail the test rather than
// skip it: in CI, a test that silently skips would prove nothing.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv(StrictEnv) == "1"
}

// InVM reports whether the test runs inside the harness's virtual machine.
func InVM() bool { return os.Getenv(VMEnv) == "1" }

// Require stops the test when ok is false: it fails under Strict and skips
// otherwise. what says what is missing.
func Require(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if Strict() {
		t.Fatalf("required for this test and missing: %s (CI=true or %s=1 makes this a failure)", what, StrictEnv)
	}
	t.Skipf("missing: %s", what)
}

// RequireRoot requires an effective user id of 0, which the kernel tests need
// for CAP_NET_ADMIN and for creating network namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, unix.Geteuid() == 0, "root (CAP_NET_ADMIN)")
}

// RequireVM requires the harness's virtual machine.
func RequireVM(t testing.TB) {
	t.Helper()
	Require(t, InVM(), "the VM harness (run with make test-vm)")
}

// RequireProgram requires an executable on PATH and returns its path.
func RequireProgram(t testing.TB, name string) string {
	t.Helper()
	path, err := lookPath(name)
	Require(t, err == nil, "program "+name+" on PATH")
	return path
}
