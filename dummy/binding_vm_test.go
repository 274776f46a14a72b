//go:build vmtest

package dummy

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// dialMode opens another connection into ns that binds as b.
func dialMode(t *testing.T, ns *testutil.NetNS, b Binding) *Conn {
	t.Helper()
	return testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: ns.FD(), Binding: b}) })
}

// readRoutesWithIP returns the destinations of the IPv4 local routes of
// protocol RouteProtocol in the local table, as iproute2 reads them,
// checking that each is the route the kernel makes for an address of its
// own.
func readRoutesWithIP(t *testing.T, ns *testutil.NetNS) []netip.Addr {
	t.Helper()
	out := ns.Run(t, "ip", "-4", "-j", "route", "show", "table", "local", "proto", strconv.Itoa(int(RouteProtocol)))
	var routes []struct {
		Type    string `json:"type"`
		Dst     string `json:"dst"`
		Dev     string `json:"dev"`
		Scope   string `json:"scope"`
		PrefSrc string `json:"prefsrc"`
	}
	if strings.TrimSpace(out) == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		t.Fatalf("ip -j route show: %v: %s", err, out)
	}
	var dsts []netip.Addr
	for _, r := range routes {
		if r.Type != "local" || r.Dev != device || r.Scope != "host" || r.PrefSrc != "" {
			t.Errorf("ip shows %+v, want local %s dev %s scope host, no src", r, r.Dst, device)
		}
		dsts = append(dsts, netip.MustParseAddr(r.Dst))
	}
	slices.SortFunc(dsts, func(a, b netip.Addr) int { return a.Compare(b) })
	return dsts
}

func split(addrs []netip.Addr) (v4, v6 []netip.Addr) {
	return only(addrs, netip.Addr.Is4), only(addrs, netip.Addr.Is6)
}

// checkRoutes compares the route mode's reader, the address mode's
// reader and iproute2's routes and addresses with want: IPv4 bound as
// routes, IPv6 as addresses, on a device that stays down.
func checkRoutes(t *testing.T, ns *testutil.NetNS, dev, asAddrs *Device, want []netip.Addr) {
	t.Helper()
	ctx := context.Background()
	want4, want6 := split(want)
	if got, err := dev.Addresses(ctx); err != nil || !slices.Equal(got, want) {
		t.Errorf("Addresses in route mode: %d, %v; want %d", len(got), err, len(want))
	}
	if got, err := asAddrs.Addresses(ctx); err != nil || !slices.Equal(got, want6) {
		t.Errorf("Addresses in address mode: %d, %v; want the %d IPv6 ones", len(got), err, len(want6))
	}
	if got, err := asAddrs.Leftovers(ctx); err != nil || !slices.Equal(got, want4) {
		t.Errorf("Leftovers in address mode: %d, %v; want the %d routes", len(got), err, len(want4))
	}
	if got, err := dev.Leftovers(ctx); err != nil || len(got) != 0 {
		t.Errorf("Leftovers in route mode: %v, %v; want none", got, err)
	}
	if got := readRoutesWithIP(t, ns); !slices.Equal(got, want4) {
		t.Errorf("ip shows %d routes, want %d", len(got), len(want4))
	}
	show := readWithIP(t, ns)
	if show == nil || show.Up || !slices.Equal(show.Addrs, want6) {
		t.Errorf("ip shows the device %+v, want it down with only the IPv6 addresses", show)
	}
}

// Bind, Unbind, BindAll and UnbindAll in route mode, each twice: IPv4
// addresses become local routes on the device, which stays down.
func TestLocalRoutes(t *testing.T) {
	ns, addrConn := setup(t)
	c := dialMode(t, ns, BindLocalRoutes)
	ctx := context.Background()
	dev, err := c.Ensure(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	asAddrs, err := addrConn.Get(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	want := addresses(1000)
	for round := range 2 {
		if err := dev.BindAll(ctx, want); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkRoutes(t, ns, dev, asAddrs, want)
	}
	// Half of each family: want holds the IPv4 addresses first.
	left := slices.Concat(want[:500], want[1500:])
	for round := range 2 {
		if err := dev.UnbindAll(ctx, want[500:1500]); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkRoutes(t, ns, dev, asAddrs, left)
	}
	one := netip.MustParseAddr("10.97.0.1")
	for range 2 {
		if err := dev.Bind(ctx, one); err != nil {
			t.Fatal(err)
		}
	}
	withOne := slices.Concat(left, []netip.Addr{one})
	slices.SortFunc(withOne, func(a, b netip.Addr) int { return a.Compare(b) })
	checkRoutes(t, ns, dev, asAddrs, withOne)
	for range 2 {
		if err := dev.Unbind(ctx, one); err != nil {
			t.Fatal(err)
		}
	}
	checkRoutes(t, ns, dev, asAddrs, left)
	if err := c.Delete(ctx, device); err != nil {
		t.Fatal(err)
	}
	if got := readRoutesWithIP(t, ns); len(got) != 0 {
		t.Errorf("%d routes outlive the device", len(got))
	}
}

// An address bound both ways is two bindings: each mode lists and
// removes only its own, and the kernel's local route for the address
// leaves ours alone.
func TestModesKeepToTheirOwn(t *testing.T) {
	ns, addrConn := setup(t)
	ctx := context.Background()
	asAddrs, err := addrConn.Ensure(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	asRoutes, err := dialMode(t, ns, BindLocalRoutes).Get(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	both, onlyAddr, onlyRoute := netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.2"), netip.MustParseAddr("10.96.0.3")
	if err := asAddrs.BindAll(ctx, []netip.Addr{both, onlyAddr}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := asRoutes.BindAll(ctx, []netip.Addr{both, onlyRoute}); err != nil {
			t.Fatalf("binding beside the kernel's own local route: %v", err)
		}
	}
	check := func(what string, got []netip.Addr, err error, want ...netip.Addr) {
		t.Helper()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", what, got, err, want)
		}
	}
	got, err := asAddrs.Addresses(ctx)
	check("Addresses in address mode", got, err, both, onlyAddr)
	got, err = asRoutes.Addresses(ctx)
	check("Addresses in route mode", got, err, both, onlyRoute)
	got, err = asAddrs.Leftovers(ctx)
	check("Leftovers in address mode", got, err, both, onlyRoute)
	got, err = asRoutes.Leftovers(ctx)
	check("Leftovers in route mode", got, err, both, onlyAddr)
	check("ip route", readRoutesWithIP(t, ns), nil, both, onlyRoute)

	// When the device's last IPv4 address goes, the kernel flushes every
	// route through it (fib_disable_ip), ours too: a switch to routes
	// binds them again after removing the addresses (the dataplane's
	// unbindLeftovers).
	if err := asRoutes.UnbindLeftovers(ctx, []netip.Addr{both, onlyAddr}); err != nil {
		t.Fatal(err)
	}
	got, err = asAddrs.Addresses(ctx)
	check("Addresses in address mode after UnbindLeftovers", got, err)
	check("ip route after the last address went", readRoutesWithIP(t, ns), nil)
	if err := asRoutes.BindAll(ctx, []netip.Addr{both, onlyRoute}); err != nil {
		t.Fatal(err)
	}
	check("ip route bound again", readRoutesWithIP(t, ns), nil, both, onlyRoute)
	if err := asAddrs.UnbindLeftovers(ctx, []netip.Addr{both, onlyRoute}); err != nil {
		t.Fatal(err)
	}
	check("ip route after UnbindLeftovers", readRoutesWithIP(t, ns), nil)
}

// The kernel takes a local route through the down device for a local
// address, as it takes its own: a socket binds to it and answers there.
func TestLocalRouteIsLocal(t *testing.T) {
	ns, _ := setup(t)
	ctx := context.Background()
	dev, err := dialMode(t, ns, BindLocalRoutes).Ensure(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	vip, other := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11")
	if err := dev.Bind(ctx, vip); err != nil {
		t.Fatal(err)
	}
	if out := ns.Run(t, "ip", "route", "get", vip.String()); !strings.HasPrefix(out, "local "+vip.String()) {
		t.Errorf("ip route get %s: %q, want a local route", vip, out)
	}
	if out, _ := ns.Output(ctx, "ip", "route", "get", other.String()); strings.HasPrefix(out, "local") {
		t.Errorf("ip route get %s: %q, an address not bound is local", other, out)
	}
	ns.ServeTCP(t, netip.AddrPortFrom(vip, 80).String(), "vip")
	if reply, err := ns.DialTCP("", netip.AddrPortFrom(vip, 80).String(), 5*time.Second); err != nil || !strings.HasPrefix(reply, "vip ") {
		t.Errorf("a connection to %s: %q, %v", vip, reply, err)
	}
}
