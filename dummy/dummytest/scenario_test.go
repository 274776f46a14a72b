package dummytest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
	"golang.org/x/sys/unix"
)

// namespace is one namespace the scenario runs in: Conns on it, and
// another program's hand on its links.
type namespace interface {
	dial(dummy.Binding) *dummy.Conn
	// addLink and deleteLink change links as another program would.
	addLink(t *testing.T, name, kind string)
	deleteLink(t *testing.T, name string)
}

type fake struct{ k *dummytest.Kernel }

func (f fake) dial(b dummy.Binding) *dummy.Conn { return f.k.DialBinding(b) }

func (f fake) addLink(t *testing.T, name, kind string) {
	if err := f.k.AddLink(name, kind); err != nil {
		t.Fatal(err)
	}
}

func (f fake) deleteLink(t *testing.T, name string) {
	if err := f.k.DeleteLink(name); err != nil {
		t.Fatal(err)
	}
}

// outcome names a call's result by what a caller can test: the sentinel
// or errno, and for a batch each failed address.
func outcome(err error) string {
	var batch *dummy.BatchError
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &batch):
		var failed []string
		for _, f := range batch.Failed {
			failed = append(failed, fmt.Sprintf("%d:%s", f.Index, outcome(f)))
		}
		return fmt.Sprint("batch ", failed)
	case errors.Is(err, dummy.ErrLinkNotExist):
		return "ErrLinkNotExist"
	case errors.Is(err, dummy.ErrLinkNotDummy):
		return "ErrLinkNotDummy"
	case errors.Is(err, dummy.ErrNotSupported):
		return "ErrNotSupported"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// scenario runs what a service proxy does with its device, and what
// happens to it meanwhile, and returns each step's outcome.
func scenario(t *testing.T, ns namespace) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	step := func(name string, err error) { out = append(out, name+": "+outcome(err)) }
	list := func(name string, a []netip.Addr, err error) {
		out = append(out, fmt.Sprintf("%s: %v %s", name, a, outcome(err)))
	}
	c := ns.dial(dummy.BindAddresses)
	defer c.Close()

	_, err := c.Get(ctx, "kube-ipvs0")
	step("get before", err)
	dev, err := c.Ensure(ctx, "kube-ipvs0")
	step("ensure", err)
	if err != nil {
		return out
	}
	_, err = c.Ensure(ctx, "kube-ipvs0")
	step("ensure again", err)
	step("bind", dev.BindAll(ctx, addrs("10.96.0.1", "10.96.0.2", "fd00::1")))
	step("bind again", dev.BindAll(ctx, addrs("10.96.0.1", "fd00::1")))
	step("unbind", dev.UnbindAll(ctx, addrs("10.96.0.2", "10.96.0.99", "fd00::99")))
	a, err := dev.Addresses(ctx)
	list("addresses", a, err)

	ns.deleteLink(t, "kube-ipvs0")
	step("bind on a deleted device", dev.BindAll(ctx, addrs("10.96.0.3")))
	ns.addLink(t, "kube-ipvs0", "dummy")
	a, err = dev.Addresses(ctx)
	list("addresses once recreated", a, err)
	step("bind once recreated", dev.BindAll(ctx, addrs("10.96.0.1", "10.96.0.4", "fd00::1")))

	routes := ns.dial(dummy.BindLocalRoutes)
	defer routes.Close()
	rdev, err := routes.Get(ctx, "kube-ipvs0")
	step("get for routes", err)
	step("bind routes", rdev.BindAll(ctx, addrs("10.96.0.5", "10.96.0.1", "fd00::2")))
	step("bind routes again", rdev.BindAll(ctx, addrs("10.96.0.5")))
	a, err = rdev.Addresses(ctx)
	list("routes' addresses", a, err)
	a, err = rdev.Leftovers(ctx)
	list("leftover addresses", a, err)
	step("unbind leftovers", rdev.UnbindLeftovers(ctx, a))
	a, err = rdev.Addresses(ctx)
	list("routes' addresses after", a, err)
	a, err = dev.Leftovers(ctx)
	list("leftover routes", a, err)
	step("unbind routes", rdev.UnbindAll(ctx, addrs("10.96.0.5", "10.96.0.6")))

	ns.addLink(t, "eth-other", "veth")
	_, err = c.Ensure(ctx, "eth-other")
	step("ensure a veth", err)
	step("delete a veth", c.Delete(ctx, "eth-other"))
	step("delete", c.Delete(ctx, "kube-ipvs0"))
	step("delete again", c.Delete(ctx, "kube-ipvs0"))
	return out
}

func TestScenario(t *testing.T) {
	got := scenario(t, fake{dummytest.New(nil)})
	want := []string{
		"get before: ErrLinkNotExist",
		"ensure: ok",
		"ensure again: ok",
		"bind: ok",
		"bind again: ok",
		"unbind: ok",
		"addresses: [10.96.0.1 fd00::1] ok",
		"bind on a deleted device: batch [0:ErrLinkNotExist]",
		"addresses once recreated: [] ok",
		"bind once recreated: ok",
		"get for routes: ok",
		"bind routes: ok",
		"bind routes again: ok",
		"routes' addresses: [10.96.0.1 10.96.0.5 fd00::1 fd00::2] ok",
		"leftover addresses: [10.96.0.1 10.96.0.4] ok",
		"unbind leftovers: ok",
		"routes' addresses after: [fd00::1 fd00::2] ok",
		"leftover routes: [] ok",
		"unbind routes: ok",
		"ensure a veth: ErrLinkNotDummy",
		"delete a veth: ErrLinkNotDummy",
		"delete: ok",
		"delete again: ok",
	}
	if !slices.Equal(got, want) {
		t.Errorf("outcomes:\n%q\nwant:\n%q", got, want)
	}
}

// A kernel without the driver refuses the device as the development
// hosts' kernel does.
func TestWithoutDriver(t *testing.T) {
	c := dummytest.New(&dummytest.Options{WithoutDriver: true}).Dial()
	defer c.Close()
	_, err := c.Ensure(context.Background(), "kube-ipvs0")
	if !errors.Is(err, dummy.ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("Ensure = %v, want ErrNotSupported with EOPNOTSUPP", err)
	}
}

// The kernel's own local route of an IPv4 address goes with the address,
// a local route of package dummy's stays beside it, and all go with the
// link's last IPv4 address.
func TestLocalRoutesBesideAddresses(t *testing.T) {
	k := dummytest.New(nil)
	ctx := context.Background()
	c := k.Dial()
	defer c.Close()
	dev, err := c.Ensure(ctx, "kube-ipvs0")
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.BindAll(ctx, addrs("10.96.0.1", "10.96.0.2")); err != nil {
		t.Fatal(err)
	}
	r := k.DialBinding(dummy.BindLocalRoutes)
	defer r.Close()
	rdev, err := r.Get(ctx, "kube-ipvs0")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdev.Bind(ctx, netip.MustParseAddr("10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := dev.Unbind(ctx, netip.MustParseAddr("10.96.0.1")); err != nil {
		t.Fatal(err)
	}
	want := "2: kube-ipvs0 dummy\n    inet 10.96.0.2/32\n" +
		"local 10.96.0.2/32 dev kube-ipvs0 table 255 proto 2 scope 254 src 10.96.0.2\n" +
		"local 10.96.0.1/32 dev kube-ipvs0 table 255 proto 201 scope 254\n"
	if got := k.Dump(); got != want {
		t.Errorf("Dump:\n%s\nwant:\n%s", got, want)
	}
	if err := dev.Unbind(ctx, netip.MustParseAddr("10.96.0.2")); err != nil {
		t.Fatal(err)
	}
	if got, want := k.Dump(), "2: kube-ipvs0 dummy\n"; got != want {
		t.Errorf("after the last address, Dump:\n%s\nwant:\n%s", got, want)
	}
}
