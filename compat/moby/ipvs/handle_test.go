package ipvs_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/compat/moby/ipvs"
	"github.com/ipvsplane/ipvsplane/inet"
	ipvsplane "github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
)

func newHandle(t *testing.T) (*ipvs.Handle, *ipvstest.Kernel) {
	t.Helper()
	k := ipvstest.New(nil)
	h := ipvs.FromConn(k.Dial())
	t.Cleanup(h.Close)
	return h, k
}

// What a Handle writes, as package ipvs's values: each moby-shaped field
// lands where the kernel reads it.
func TestHandleWrites(t *testing.T) {
	h, k := newHandle(t)
	tcp := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: net.ParseIP("10.96.0.1"),
		Port: 80, SchedName: ipvs.RoundRobin, Flags: 0x1, Timeout: 300, Netmask: rawMask24}
	v6 := &ipvs.Service{AddressFamily: syscall.AF_INET6, Protocol: syscall.IPPROTO_UDP, Address: net.ParseIP("fd00::1"),
		Port: 53, SchedName: ipvs.SourceHashing, Flags: 0x8 | 0x10, Netmask: 64}
	fwm := &ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 9, SchedName: ipvs.WeightedRoundRobin}
	for _, s := range []*ipvs.Service{tcp, v6, fwm} {
		if err := h.NewService(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*ipvs.Destination{
		{Address: net.ParseIP("10.244.0.1"), Port: 8080, Weight: 1},
		{Address: net.ParseIP("10.244.0.2"), Port: 8080, Weight: 0, ConnectionFlags: ipvs.ConnectionFlagDirectRoute},
		{Address: net.ParseIP("10.244.0.3").To4(), Port: 8080, Weight: 70000, ConnectionFlags: ipvs.ConnectionFlagTunnel,
			UpperThreshold: 100, LowerThreshold: 10},
	} {
		if err := h.NewDestination(tcp, d); err != nil {
			t.Fatal(err)
		}
	}
	a := netip.MustParseAddr
	want := []ipvsplane.VirtualServer{
		{Service: ipvsplane.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: a("10.96.0.1"), Port: 80,
			Scheduler: "rr", Flags: ipvsplane.Persistent | ipvsplane.Hashed, Timeout: 300 * time.Second, Netmask: 24},
			Destinations: []ipvsplane.Destination{
				{Addr: a("10.244.0.1"), Port: 8080, Weight: 1},
				{Addr: a("10.244.0.2"), Port: 8080, Drained: true, Forward: ipvsplane.Route},
				{Addr: a("10.244.0.3"), Port: 8080, Weight: 70000, Forward: ipvsplane.Tunnel, UpperThreshold: 100, LowerThreshold: 10},
			}},
		{Service: ipvsplane.Service{Family: inet.IPv6, Protocol: inet.UDP, Addr: a("fd00::1"), Port: 53,
			Scheduler: "sh", Flags: ipvsplane.SHFallback | ipvsplane.SHPort | ipvsplane.Hashed, Netmask: 64}},
		{Service: ipvsplane.Service{Family: inet.IPv4, FirewallMark: 9, Scheduler: "wrr", Flags: ipvsplane.Hashed, Netmask: 32}},
	}
	if got := k.Table(); !reflect.DeepEqual(got, want) {
		t.Fatalf("kernel table:\n got %+v\nwant %+v", got, want)
	}
}

// rawMask24 is 255.255.255.0 as moby/ipvs's Netmask holds it: the
// attribute's bytes read as a host integer.
var rawMask24 = binary.NativeEndian.Uint32([]byte{255, 255, 255, 0})

// What the Get methods return, in moby/ipvs's shape.
func TestHandleReads(t *testing.T) {
	h, _ := newHandle(t)
	if svcs, err := h.GetServices(); svcs != nil || err != nil {
		t.Fatalf("empty table: %v, %v", svcs, err)
	}
	tcp := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: net.ParseIP("10.96.0.1"),
		Port: 80, SchedName: ipvs.RoundRobin, Netmask: 0xffffffff}
	fwm := &ipvs.Service{AddressFamily: syscall.AF_INET6, FWMark: 9, SchedName: ipvs.RoundRobin, Netmask: 128}
	for _, s := range []*ipvs.Service{tcp, fwm} {
		if err := h.NewService(s); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := h.GetDestinations(tcp); ds != nil || err != nil {
		t.Fatalf("no destinations: %v, %v", ds, err)
	}
	d := &ipvs.Destination{Address: net.ParseIP("10.244.0.1"), Port: 8080, Weight: 70000, LowerThreshold: 1, UpperThreshold: 2}
	if err := h.NewDestination(tcp, d); err != nil {
		t.Fatal(err)
	}
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	wantTCP := *tcp
	wantTCP.Address, wantTCP.Flags = net.IP{10, 96, 0, 1}, 0x2
	wantFWM := *fwm
	wantFWM.Flags = 0x2
	if want := []*ipvs.Service{&wantTCP, &wantFWM}; !reflect.DeepEqual(svcs, want) {
		t.Fatalf("GetServices:\n got %+v\nwant %+v", deref(svcs), deref(want))
	}
	if got, err := h.GetService(fwm); err != nil || !reflect.DeepEqual(got, &wantFWM) {
		t.Fatalf("GetService: %+v, %v", got, err)
	}
	ds, err := h.GetDestinations(svcs[0])
	if err != nil {
		t.Fatal(err)
	}
	wantD := *d
	wantD.Address, wantD.AddressFamily = net.IP{10, 244, 0, 1}, syscall.AF_INET
	if len(ds) != 1 || !reflect.DeepEqual(*ds[0], wantD) {
		t.Fatalf("GetDestinations: %+v", deref(ds))
	}
	if !h.IsServicePresent(tcp) {
		t.Error("IsServicePresent false for an existing service")
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if h.IsServicePresent(tcp) {
		t.Error("IsServicePresent true after Flush")
	}
}

func deref[T any](ps []*T) []T {
	var out []T
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

// The kernel's refusals are the bare syscall.Errno moby/ipvs returned, so
// that its callers' err == syscall.EEXIST holds; values refused before
// any request are *ipvs.OpError values saying why.
func TestHandleErrors(t *testing.T) {
	h, _ := newHandle(t)
	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: net.ParseIP("10.96.0.1"),
		Port: 80, SchedName: ipvs.RoundRobin}
	dst := &ipvs.Destination{Address: net.ParseIP("10.244.0.1"), Port: 80, Weight: 1}
	if err := h.NewService(svc); err != nil {
		t.Fatal(err)
	}
	_, getErr := h.GetService(&ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 9})
	for _, c := range []struct {
		name  string
		err   error
		errno syscall.Errno
	}{
		{"create twice", h.NewService(svc), syscall.EEXIST},
		{"delete missing destination", h.DelDestination(svc, dst), syscall.ENOENT},
		{"update missing service", h.UpdateService(&ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 1, SchedName: "rr"}),
			syscall.ESRCH},
		{"get missing service", getErr, syscall.ESRCH},
		{"unknown family", h.NewService(&ipvs.Service{AddressFamily: 99, FWMark: 1}), syscall.EAFNOSUPPORT},
		{"unknown scheduler", h.NewService(&ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 2, SchedName: "nope"}),
			syscall.ENOENT},
	} {
		if c.err != c.errno {
			t.Errorf("%s: %#v, want the bare %#v", c.name, c.err, c.errno)
		}
	}
	var oe *ipvsplane.OpError
	err := h.NewDestination(svc, &ipvs.Destination{Address: net.IP{1, 2, 3}})
	if !errors.As(err, &oe) || oe.Op != "create destination" || !strings.Contains(oe.Object, "10.96.0.1:80 -> ") {
		t.Errorf("bad address: %#v", err)
	}
	if err := h.SetConfig(nil); !errors.As(err, &oe) {
		t.Errorf("SetConfig(nil): %v", err)
	}
}

// Timeouts are whole seconds; zero leaves one unchanged.
func TestHandleConfig(t *testing.T) {
	h, k := newHandle(t)
	if err := h.SetConfig(&ipvs.Config{TimeoutTCP: 901500 * time.Millisecond, TimeoutUDP: 31 * time.Second}); err != nil {
		t.Fatal(err)
	}
	want := ipvsplane.Timeouts{TCP: 901 * time.Second, TCPFin: 120 * time.Second, UDP: 31 * time.Second}
	if got := k.Timeouts(); got != want {
		t.Fatalf("kernel timeouts %+v, want %+v", got, want)
	}
	c, err := h.GetConfig()
	if err != nil || *c != (ipvs.Config{TimeoutTCP: want.TCP, TimeoutTCPFin: want.TCPFin, TimeoutUDP: want.UDP}) {
		t.Fatalf("GetConfig: %+v, %v", c, err)
	}
}
