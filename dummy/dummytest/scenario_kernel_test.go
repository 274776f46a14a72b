//go:build hosttest || vmtest

package dummytest_test

import (
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kernel is a fresh namespace of the running kernel, its links changed by
// iproute2 as another program would.
type kernel struct{ ns *testutil.NetNS }

func (k kernel) dial(b dummy.Binding) *dummy.Conn {
	c, err := dummy.Dial(&dummy.Config{NetNS: k.ns.FD(), Binding: b})
	if err != nil {
		panic(err)
	}
	return c
}

func (k kernel) addLink(t *testing.T, name, kind string) {
	args := []string{"link", "add", name, "type", kind}
	if kind == "veth" {
		args = append(args, "peer", "name", name+"-peer")
	}
	k.ns.Run(t, "ip", args...)
}

func (k kernel) deleteLink(t *testing.T, name string) { k.ns.Run(t, "ip", "link", "del", name) }

// The fake stays honest: the same scenario on the running kernel has the
// same outcomes. On a kernel without the dummy driver (the development
// hosts') it stops at Ensure, and the fake is asked to lack the driver
// too; in the VM it runs whole.
func TestScenarioMatchesKernel(t *testing.T) {
	testutil.RequireProgram(t, "ip")
	onKernel := scenario(t, kernel{testutil.NewNetNS(t)})
	withoutDriver := slices.Contains(onKernel, "ensure: ErrNotSupported")
	if withoutDriver {
		t.Log("this kernel has no dummy driver: comparing that much")
	}
	onFake := scenario(t, fake{dummytest.New(&dummytest.Options{WithoutDriver: withoutDriver})})
	if !slices.Equal(onKernel, onFake) {
		t.Errorf("the kernel:\n%q\nthe fake:\n%q", onKernel, onFake)
	}
}
