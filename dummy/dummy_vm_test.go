//go:build vmtest

package dummy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

const device = "kube-ipvs0"

// setup dials into a fresh namespace of the guest.
func setup(t *testing.T) (*testutil.NetNS, *Conn) {
	t.Helper()
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ip")
	ns := testutil.NewNetNS(t)
	return ns, testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: ns.FD()}) })
}

// ipShow is what iproute2 reports about the device: nil when it is absent.
type ipShow struct {
	Kind  string
	Up    bool
	Addrs []netip.Addr
}

func readWithIP(t *testing.T, ns *testutil.NetNS) *ipShow {
	t.Helper()
	out, err := ns.Output(context.Background(), "ip", "-j", "-d", "addr", "show", "dev", device)
	if err != nil {
		return nil
	}
	var links []struct {
		Flags    []string `json:"flags"`
		LinkInfo struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j addr show: %v: %s", err, out)
	}
	show := &ipShow{Kind: links[0].LinkInfo.Kind, Up: slices.Contains(links[0].Flags, "UP")}
	for _, a := range links[0].AddrInfo {
		addr := netip.MustParseAddr(a.Local)
		if a.PrefixLen != addr.BitLen() {
			t.Errorf("ip shows %s/%d, want a host prefix", a.Local, a.PrefixLen)
		}
		show.Addrs = append(show.Addrs, addr)
	}
	slices.SortFunc(show.Addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return show
}

func addresses(n int) []netip.Addr {
	var addrs []netip.Addr
	for i := range n {
		addrs = append(addrs,
			netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
			netip.MustParseAddr(fmt.Sprintf("fd00:96::%x", i+1)))
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return addrs
}

// checkState compares our reader and iproute2's with want.
func checkState(t *testing.T, ns *testutil.NetNS, dev *Device, want []netip.Addr) {
	t.Helper()
	got, err := dev.Addresses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Addresses: %d addresses, want %d", len(got), len(want))
	}
	show := readWithIP(t, ns)
	if show == nil {
		t.Fatal("ip does not see the device")
	}
	if show.Kind != "dummy" || show.Up {
		t.Errorf("ip shows kind %q up=%v, want a dummy device that is down", show.Kind, show.Up)
	}
	if !slices.Equal(show.Addrs, want) {
		t.Errorf("ip shows %d addresses, want %d", len(show.Addrs), len(want))
	}
}

func TestLifecycle(t *testing.T) {
	for _, n := range []int{1, 2000} {
		t.Run(fmt.Sprintf("%d per family", n), func(t *testing.T) {
			ns, c := setup(t)
			ctx := context.Background()
			want := addresses(n)
			// Every step twice: the second run must change nothing.
			for round := range 2 {
				dev, err := c.Ensure(ctx, device)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				for _, a := range want {
					if err := dev.Bind(ctx, a); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				checkState(t, ns, dev, want)
			}
			dev, err := c.Get(ctx, device)
			if err != nil {
				t.Fatal(err)
			}
			half := want[:len(want)/2]
			for round := range 2 {
				for _, a := range want[len(want)/2:] {
					if err := dev.Unbind(ctx, a); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				checkState(t, ns, dev, half)
			}
			for range 2 {
				if err := c.Delete(ctx, device); err != nil {
					t.Fatal(err)
				}
				if show := readWithIP(t, ns); show != nil {
					t.Fatalf("ip still shows the device: %+v", show)
				}
			}
			if _, err := c.Get(ctx, device); !errors.Is(err, ErrLinkNotExist) {
				t.Errorf("Get after Delete: %v, want ErrLinkNotExist", err)
			}
			if err := dev.Bind(ctx, want[0]); !errors.Is(err, ErrLinkNotExist) {
				t.Errorf("Bind after Delete: %v, want ErrLinkNotExist", err)
			}
		})
	}
}

// BindAll and UnbindAll do in few writes what Bind and Unbind do one by
// one, with the same idempotence.
func TestBatches(t *testing.T) {
	ns, c := setup(t)
	ctx := context.Background()
	want := addresses(2000)
	dev, err := c.Ensure(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if err := dev.BindAll(ctx, want); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkState(t, ns, dev, want)
	}
	for round := range 2 {
		if err := dev.UnbindAll(ctx, want[1000:]); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkState(t, ns, dev, want[:1000])
	}
	err = dev.BindAll(ctx, []netip.Addr{want[0], {}, want[1]})
	var e *BatchError
	if !errors.As(err, &e) || len(e.Failed) != 1 || e.Failed[0].Op != "bind" || e.Failed[0].Index != 1 {
		t.Errorf("an invalid address in a batch: %v", err)
	}
	if err := c.Delete(ctx, device); err != nil {
		t.Fatal(err)
	}
	if err := dev.BindAll(ctx, want[:3]); !errors.Is(err, ErrLinkNotExist) {
		t.Errorf("BindAll on a deleted device: %v, want ErrLinkNotExist", err)
	}
}

func TestForeignLinkIsLeftAlone(t *testing.T) {
	ns, c := setup(t)
	ctx := context.Background()
	if out, err := ns.Output(ctx, "ip", "link", "add", device, "type", "veth", "peer", "name", "peer0"); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	if _, err := c.Ensure(ctx, device); !errors.Is(err, ErrLinkNotDummy) {
		t.Errorf("Ensure over a veth: %v, want ErrLinkNotDummy", err)
	}
	if err := c.Delete(ctx, device); !errors.Is(err, ErrLinkNotDummy) {
		t.Errorf("Delete of a veth: %v, want ErrLinkNotDummy", err)
	}
	if show := readWithIP(t, ns); show == nil || show.Kind != "veth" {
		t.Errorf("the veth did not survive: %+v", show)
	}
}

// A Device outlives its link being deleted and created anew by someone
// else: it is known by name, not by a cached interface index.
func TestDeviceRecreated(t *testing.T) {
	ns, c := setup(t)
	ctx := context.Background()
	dev, err := c.Ensure(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	want := addresses(2)
	if err := dev.BindAll(ctx, want[:2]); err != nil {
		t.Fatal(err)
	}
	// Another link first, so the new device gets another index.
	for _, args := range [][]string{
		{"link", "del", device},
		{"link", "add", "other0", "type", "dummy"},
		{"link", "add", device, "type", "dummy"},
	} {
		if out, err := ns.Output(ctx, "ip", args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	if err := dev.Bind(ctx, want[2]); err != nil {
		t.Fatalf("Bind after the device was recreated: %v", err)
	}
	if err := dev.BindAll(ctx, want[3:]); err != nil {
		t.Fatalf("BindAll after the device was recreated: %v", err)
	}
	if err := dev.Unbind(ctx, want[3]); err != nil {
		t.Fatalf("Unbind after the device was recreated: %v", err)
	}
	checkState(t, ns, dev, slices.Concat(want[2:3], want[4:]))
}

func TestContext(t *testing.T) {
	_, c := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Ensure(ctx, device); !errors.Is(err, context.Canceled) {
		t.Errorf("Ensure with a canceled context: %v", err)
	}
}
