//go:build vmtest

package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

var schedulers = []Scheduler{RoundRobin, WeightedRoundRobin, LeastConnection, WeightedLeastConnection, SourceHashing, MaglevHashing, ShortestExpectedDelay, NeverQueue}

// serviceKinds are a service of each kind for one family.
func serviceKinds(f inet.Family) []Service {
	addr := netip.MustParseAddr("10.96.0.1")
	if f == inet.IPv6 {
		addr = netip.MustParseAddr("fd00:96::1")
	}
	return []Service{
		{Protocol: inet.TCP, Addr: addr, Port: 80},
		{Protocol: inet.UDP, Addr: addr, Port: 53},
		{Protocol: inet.SCTP, Addr: addr, Port: 9},
		{Family: f, FirewallMark: 42},
	}
}

func realServer(f inet.Family, i int, port uint16) Destination {
	a := netip.AddrFrom4([4]byte{10, 244, 0, byte(i)})
	if f == inet.IPv6 {
		a = netip.AddrFrom16([16]byte{0xfd, 0, 0x2, 0x44, 15: byte(i)})
	}
	return Destination{Addr: a, Port: port, Weight: 1}
}

// Every operation on every kind of service, for both families, each state
// checked with the three readers.
func TestLifecycle(t *testing.T) {
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		for i, base := range serviceKinds(f) {
			t.Run(fmt.Sprintf("%v/%v", f, base), func(t *testing.T) {
				e := setup(t)
				c := testutil.Context(t)
				svc := base
				svc.Scheduler = schedulers[i]
				if err := e.c.CreateService(c, svc); err != nil {
					t.Fatal(err)
				}
				e.check([]VirtualServer{{Service: svc}})

				d1, d2 := realServer(f, 1, 8080), realServer(f, 2, 8080)
				d2.Weight, d2.UpperThreshold, d2.LowerThreshold = 5, 100, 10
				for _, d := range []Destination{d1, d2} {
					if err := e.c.CreateDestination(c, svc, d); err != nil {
						t.Fatal(err)
					}
				}
				e.check([]VirtualServer{{Service: svc, Destinations: []Destination{d1, d2}}})

				got, err := e.c.GetService(c, svc)
				if err != nil {
					t.Fatal(err)
				}
				if got.Scheduler != svc.Scheduler || got.Flags&Hashed == 0 {
					t.Fatalf("GetService: %+v", got)
				}
				if got, err := e.c.GetDestination(c, svc, d2); err != nil || got.Weight != 5 || got.UpperThreshold != 100 {
					t.Fatalf("GetDestination: %+v, %v", got, err)
				}

				// Update: a new scheduler and persistence; a drained
				// destination with new thresholds.
				svc.Scheduler, svc.Flags, svc.Timeout = "wrr", Persistent, 600*time.Second
				if err := e.c.UpdateService(c, svc); err != nil {
					t.Fatal(err)
				}
				d1.Weight, d1.Drained, d1.UpperThreshold = 0, true, 7
				if err := e.c.UpdateDestination(c, svc, d1); err != nil {
					t.Fatal(err)
				}
				e.check([]VirtualServer{{Service: svc, Destinations: []Destination{d1, d2}}})

				if err := e.c.DeleteDestination(c, svc, d1); err != nil {
					t.Fatal(err)
				}
				e.check([]VirtualServer{{Service: svc, Destinations: []Destination{d2}}})

				if err := e.c.DeleteService(c, svc); err != nil {
					t.Fatal(err)
				}
				e.check(nil)
			})
		}
	}
}

// Every scheduler, with the scheduler flags of sh and mh.
func TestSchedulers(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	var want []VirtualServer
	for i, sched := range schedulers {
		svc := Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, 1, byte(i)}), Port: 443, Scheduler: sched}
		switch sched {
		case "sh":
			svc.Flags = SHFallback | SHPort
		case "mh":
			svc.Flags = MHFallback
		}
		if err := e.c.CreateService(c, svc); err != nil {
			t.Fatalf("%s: %v", sched, err)
		}
		d := realServer(inet.IPv4, i, 443)
		if err := e.c.CreateDestination(c, svc, d); err != nil {
			t.Fatal(err)
		}
		want = append(want, VirtualServer{Service: svc, Destinations: []Destination{d}})
	}
	e.check(want)
}

// Persistence: timeout, netmask for both families, one-packet scheduling.
func TestPersistence(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	want := []VirtualServer{
		{Service: Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.5"), Port: 80, Scheduler: "rr",
			Flags: Persistent, Timeout: 10800 * time.Second}},
		{Service: Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.6"), Port: 80, Scheduler: "rr",
			Flags: Persistent, Timeout: 60 * time.Second, Netmask: 24}},
		{Service: Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("fd00:96::6"), Port: 53, Scheduler: "lc",
			Flags: Persistent, Timeout: 300 * time.Second, Netmask: 64}},
		{Service: Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.7"), Port: 53, Scheduler: "rr", Flags: OnePacket}},
	}
	for _, v := range want {
		if err := e.c.CreateService(c, v.Service); err != nil {
			t.Fatal(err)
		}
	}
	e.check(want)
	got, err := e.c.GetService(c, want[1].Service)
	if err != nil || got.Netmask != 24 || got.Timeout != time.Minute {
		t.Fatalf("GetService: %+v, %v", got, err)
	}
	out := e.ns.Run(t, "ipvsadm", "-Ln", "--exact")
	if !strings.Contains(out, "persistent 60 mask 255.255.255.0") {
		t.Fatalf("ipvsadm -Ln:\n%s", out)
	}
}

// Every forwarding method, tunnel types and their settings, and a
// destination of the other family behind a tunnel.
func TestForwarding(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	svc := Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Scheduler: "wlc"}
	dests := []Destination{
		{Addr: netip.MustParseAddr("10.244.0.1"), Port: 8080, Forward: Masquerade, Weight: 1},
		{Addr: netip.MustParseAddr("10.244.0.2"), Port: 80, Forward: Route, Weight: 2},
		{Addr: netip.MustParseAddr("10.244.0.3"), Port: 80, Forward: Tunnel, Weight: 3, TunnelType: IPIP},
		{Addr: netip.MustParseAddr("10.244.0.4"), Port: 80, Forward: Tunnel, Weight: 4, TunnelType: GUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum},
		{Addr: netip.MustParseAddr("10.244.0.5"), Port: 80, Forward: Tunnel, Weight: 5, TunnelType: GUE, TunnelPort: 6081, TunnelFlags: TunnelRemoteChecksum},
		{Addr: netip.MustParseAddr("10.244.0.6"), Port: 80, Forward: Tunnel, Weight: 6, TunnelType: GRE},
		{Addr: netip.MustParseAddr("fd00:244::7"), Port: 80, Forward: Tunnel, Weight: 7, TunnelType: IPIP},
	}
	if err := e.c.CreateService(c, svc); err != nil {
		t.Fatal(err)
	}
	for _, d := range dests {
		if err := e.c.CreateDestination(c, svc, d); err != nil {
			t.Fatalf("%v: %v", d, err)
		}
	}
	e.check([]VirtualServer{{Service: svc, Destinations: dests}})
	out := e.ns.Run(t, "ipvsadm", "-Ln", "--exact", "--tun-info")
	for _, s := range []string{"gue:6080:+c", "gue:6081:r+c", "gre:-c"} {
		if !strings.Contains(out, s) {
			t.Errorf("ipvsadm --tun-info lacks %q:\n%s", s, out)
		}
	}
	// Tunnel back to masquerade: the tunnel settings go away.
	d := dests[3]
	d.Forward, d.TunnelType, d.TunnelPort, d.TunnelFlags = Masquerade, 0, 0, 0
	if err := e.c.UpdateDestination(c, svc, d); err != nil {
		t.Fatal(err)
	}
	dests[3] = d
	e.check([]VirtualServer{{Service: svc, Destinations: dests}})
}

func TestErrorsVM(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	svc := Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.20"), Port: 80, Scheduler: "rr"}
	d := realServer(inet.IPv4, 1, 80)
	if err := e.c.CreateService(c, svc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.CreateDestination(c, svc, d); err != nil {
		t.Fatal(err)
	}
	missing := Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.21"), Port: 80}
	tests := []struct {
		name  string
		err   error
		is    error
		errno unix.Errno
	}{
		{"duplicate service", e.c.CreateService(c, svc), ErrServiceExist, unix.EEXIST},
		{"duplicate destination", e.c.CreateDestination(c, svc, d), ErrDestinationExist, unix.EEXIST},
		{"update missing service", e.c.UpdateService(c, missing), ErrServiceNotExist, unix.ESRCH},
		{"delete missing service", e.c.DeleteService(c, missing), ErrServiceNotExist, unix.ESRCH},
		{"destination of missing service", e.c.CreateDestination(c, missing, d), ErrServiceNotExist, unix.ESRCH},
		{"update missing destination", e.c.UpdateDestination(c, svc, realServer(inet.IPv4, 9, 80)), ErrDestinationNotExist, unix.ENOENT},
		{"delete missing destination", e.c.DeleteDestination(c, svc, realServer(inet.IPv4, 9, 80)), ErrDestinationNotExist, unix.ENOENT},
		{"unknown scheduler", e.c.CreateService(c, Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.22"), Port: 1, Scheduler: "nosuch"}),
			ErrSchedulerNotSupported, unix.ENOENT},
		{"masquerade to the other family", e.c.CreateDestination(c, svc, realServer(inet.IPv6, 1, 80)), unix.EINVAL, unix.EINVAL},
		{"get missing service", func() error { _, err := e.c.GetService(c, missing); return err }(), ErrServiceNotExist, unix.ESRCH},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.is) || !errors.Is(tt.err, tt.errno) {
				t.Fatalf("%v: want %v and %v", tt.err, tt.is, tt.errno)
			}
			t.Log(tt.err)
		})
	}
	e.check([]VirtualServer{{Service: svc, Destinations: []Destination{d}}})
}

// A batch of 10,000 operations in which some fail: those fail with the
// right errors, and the rest are applied.
func TestBatch10000(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	var (
		b    Batch
		want []VirtualServer
		bad  = map[int]error{}
	)
	for i := range 2000 {
		svc := Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		b.CreateService(svc)
		v := VirtualServer{Service: svc}
		for j := range 4 {
			d := realServer(inet.IPv4, j+1, uint16(8000+i))
			if i%400 == 3 && j == 3 {
				bad[b.Len()] = ErrDestinationExist
				b.CreateDestination(svc, v.Destinations[0])
				continue
			}
			b.CreateDestination(svc, d)
			v.Destinations = append(v.Destinations, d)
		}
		want = append(want, v)
	}
	bad[b.Len()] = ErrServiceNotExist
	b.DeleteService(Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.255.255"), Port: 1})
	bad[b.Len()] = ErrServiceExist
	b.CreateService(want[10].Service)
	bad[b.Len()] = ErrSchedulerNotSupported
	b.CreateService(Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.97.0.1"), Port: 1, Scheduler: "nosuch"})
	bad[b.Len()] = ErrDestinationNotExist
	b.DeleteDestination(want[20].Service, realServer(inet.IPv4, 99, 1))
	if b.Len() != 10004 {
		t.Fatalf("batch of %d", b.Len())
	}

	start := time.Now()
	err := e.c.Apply(c, &b)
	t.Logf("%d operations applied in %v", b.Len(), time.Since(start))
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != len(bad) {
		t.Fatalf("Apply: %v", err)
	}
	for _, f := range be.Failed {
		if want, ok := bad[f.Index]; !ok || !errors.Is(f, want) {
			t.Errorf("operation %d: %v, want %v", f.Index, f, want)
		}
	}
	e.check(want)
}

func TestTimeoutsInfoZeroFlush(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	if err := e.c.SetTimeouts(c, Timeouts{TCP: 901 * time.Second, TCPFin: 121 * time.Second, UDP: 301 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if out := e.ns.Run(t, "ipvsadm", "-L", "--timeout"); !strings.Contains(out, "901 121 301") {
		t.Fatalf("ipvsadm --timeout: %s", out)
	}
	if err := e.c.SetTimeouts(c, Timeouts{UDP: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.Timeouts(c)
	if err != nil || got != (Timeouts{TCP: 901 * time.Second, TCPFin: 121 * time.Second, UDP: 30 * time.Second}) {
		t.Fatalf("Timeouts: %+v, %v", got, err)
	}
	info, err := e.c.Info(c)
	if err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("IP Virtual Server version %v (size=%d)", info.Version, info.ConnTableSize)
	if out := e.ns.Run(t, "ipvsadm", "-Ln"); !strings.HasPrefix(out, header) {
		t.Fatalf("Info %+v; ipvsadm -Ln:\n%s", info, out)
	}
	svc := Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.30"), Port: 80}
	if err := e.c.CreateService(c, svc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.ZeroService(c, svc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Zero(c); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Flush(c); err != nil {
		t.Fatal(err)
	}
	e.check(nil)
}

// A cancelled context reaches a call, and Dial in a namespace keeps to it.
func TestContextAndNamespace(t *testing.T) {
	e := setup(t)
	other := setup(t)
	c := testutil.Context(t)
	svc := Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.40"), Port: 80}
	if err := e.c.CreateService(c, svc); err != nil {
		t.Fatal(err)
	}
	if svcs, err := other.c.Services(c); err != nil || len(svcs) != 0 {
		t.Fatalf("the other namespace sees %v, %v", svcs, err)
	}
	cancelled, cancel := contextCancelled()
	defer cancel()
	if _, err := e.c.Services(cancelled); err == nil {
		t.Fatal("a cancelled context did not stop the call")
	}
	if _, err := e.c.Services(c); err != nil {
		t.Fatal(err)
	}
}

// Every one of 10,000 operations fails, so the kernel sends 10,000 error
// replies: the socket buffers and write sizes keep them all, none is lost
// to ENOBUFS, with the buffers Dial asks for and with the kernel's
// default ones that an unprivileged process gets.
func TestBatchAllFail(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprintf("default-buffers=%v", small), func(t *testing.T) {
			e := setup(t)
			if small {
				if err := e.c.nl.SetBuffers(106496, 106496); err != nil {
					t.Fatal(err)
				}
			}
			var b Batch
			for i := range 10000 {
				b.DeleteService(Service{Protocol: inet.UDP, Addr: netip.AddrFrom4([4]byte{10, 98, byte(i >> 8), byte(i)}), Port: 53})
			}
			err := e.c.Apply(testutil.Context(t), &b)
			var be *BatchError
			if !errors.As(err, &be) || len(be.Failed) != b.Len() {
				t.Fatalf("Apply: %v", err)
			}
			for i, f := range be.Failed {
				if f.Index != i || !errors.Is(f, ErrServiceNotExist) || !errors.Is(f, unix.ESRCH) {
					t.Fatalf("operation %d: %v", i, f)
				}
			}
		})
	}
}
