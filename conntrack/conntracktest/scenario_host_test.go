//go:build hosttest || vmtest

package conntracktest_test

import (
	"fmt"
	"testing"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/conntracktest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The fake stays honest: the same calls on a kernel's table, in a fresh
// namespace, have the same outcomes and leave the same entries.
func TestScenarioMatchesKernel(t *testing.T) {
	ns := testutil.NewNetNS(t)
	kc := testutil.Open(t, func() (*conntrack.Conn, error) { return conntrack.Dial(&conntrack.Config{NetNS: ns.FD()}) })
	onKernel := scenario(t, kc)

	fc := conntracktest.New(nil).Dial()
	defer fc.Close()
	onFake := scenario(t, fc)

	if fmt.Sprintf("%q", onKernel) != fmt.Sprintf("%q", onFake) {
		t.Errorf("the kernel:\n%q\nthe fake:\n%q", onKernel, onFake)
	}
}
