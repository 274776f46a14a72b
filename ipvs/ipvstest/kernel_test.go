package ipvstest_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
	"golang.org/x/sys/unix"
)

// What the kernel refuses about destinations, and the services keyed by
// firewall mark, which carry no address.
func TestKernelChecks(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()
	fwm := ipvs.Service{Family: inet.IPv6, FirewallMark: 7, Scheduler: ipvs.SourceHashing}
	v4 := ipvs.Destination{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}
	tunnelled := ipvs.Destination{Addr: netip.MustParseAddr("10.0.0.2"), Port: 80, Forward: ipvs.Tunnel}
	if err := c.CreateService(ctx, fwm); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDestination(ctx, fwm, v4); !errors.Is(err, unix.EINVAL) {
		t.Errorf("IPv4 destination of an IPv6 service, masqueraded: %v, want EINVAL", err)
	}
	if err := c.CreateDestination(ctx, fwm, tunnelled); err != nil {
		t.Errorf("IPv4 destination of an IPv6 service, tunnelled: %v", err)
	}
	thresholds := tunnelled
	thresholds.UpperThreshold, thresholds.LowerThreshold = 10, 20
	if err := c.UpdateDestination(ctx, fwm, thresholds); !errors.Is(err, unix.ERANGE) {
		t.Errorf("lower threshold above the upper: %v, want ERANGE", err)
	}
	got, err := c.GetService(ctx, ipvs.Service{Family: inet.IPv6, FirewallMark: 7})
	if err != nil || got.FirewallMark != 7 || got.Scheduler != ipvs.SourceHashing || got.Netmask != 128 {
		t.Errorf("GetService: %+v, %v", got, err)
	}
	if err := c.CreateService(ctx, ipvs.Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.9"), Port: 1, PersistenceEngine: "nope"}); !errors.Is(err, ipvs.ErrSchedulerNotSupported) {
		t.Errorf("unknown persistence engine: %v", err)
	}
}

// Conns of one kernel share its table, as sockets of one namespace do,
// and Dump prints it.
func TestSharedStateAndDump(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(&ipvstest.Options{DumpPart: 1})
	a, b := k.Dial(), k.Dial()
	defer a.Close()
	defer b.Close()
	svc := ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53, Scheduler: ipvs.RoundRobin,
		Flags: ipvs.Persistent, Timeout: 3 * time.Minute}
	if err := a.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := ipvs.Destination{Addr: netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)}), Port: 53, Weight: i + 1}
		if err := b.CreateDestination(ctx, svc, d); err != nil {
			t.Fatal(err)
		}
	}
	table, err := a.Table(ctx)
	if err != nil || len(table) != 1 || len(table[0].Destinations) != 3 {
		t.Fatalf("Table: %+v, %v", table, err)
	}
	const want = `UDP 10.96.0.10:53 rr persistent 180
  -> 10.244.0.1:53 masq 1
  -> 10.244.0.2:53 masq 2
  -> 10.244.0.3:53 masq 3
`
	if got := k.Dump(); got != want {
		t.Errorf("Dump:\n%s\nwant:\n%s", got, want)
	}
	if err := b.SetTimeouts(ctx, ipvs.Timeouts{UDP: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := k.Timeouts(); got.UDP != time.Minute || got.TCP != 900*time.Second {
		t.Errorf("Timeouts: %+v", got)
	}
}

// Connection counts stand in for traffic: read back by Destinations, kept
// through an edit (a drain), and refused for what does not exist.
func TestSetConnections(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()
	svc := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Scheduler: ipvs.RoundRobin}
	dest := ipvs.Destination{Addr: netip.MustParseAddr("10.244.0.5"), Port: 8080, Weight: 1}
	if err := c.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDestination(ctx, svc, dest); err != nil {
		t.Fatal(err)
	}
	if err := k.SetConnections(svc, dest.Addr, dest.Port, 3, 2); err != nil {
		t.Fatal(err)
	}
	drained := dest
	drained.Weight, drained.Drained = 0, true
	if err := c.UpdateDestination(ctx, svc, drained); err != nil {
		t.Fatal(err)
	}
	dests, err := c.Destinations(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dests) != 1 || dests[0].ActiveConnections != 3 || dests[0].InactiveConnections != 2 || dests[0].Weight != 0 {
		t.Errorf("drained destination %+v, want weight 0 with 3 active and 2 inactive connections", dests)
	}
	// A Service without its Family names it by its address, as Conn's
	// methods take it.
	unset := svc
	unset.Family = 0
	if err := k.SetConnections(unset, dest.Addr, dest.Port, 4, 1); err != nil {
		t.Errorf("service without Family: %v", err)
	}
	if err := k.SetConnections(svc, dest.Addr, 9, 1, 0); !errors.Is(err, ipvs.ErrDestinationNotExist) {
		t.Errorf("missing destination: %v, want ErrDestinationNotExist", err)
	}
	other := svc
	other.Port = 81
	if err := k.SetConnections(other, dest.Addr, dest.Port, 1, 0); !errors.Is(err, ipvs.ErrServiceNotExist) {
		t.Errorf("missing service: %v, want ErrServiceNotExist", err)
	}
}

// Many services: the table keeps the order they were created in through
// deletes and a re-create, and each is found by its key (the fake once
// scanned its table for every command).
func TestManyServices(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()
	const n = 4000
	svcs := make([]ipvs.Service, n)
	var create, del ipvs.Batch
	var want []netip.Addr
	for i := range svcs {
		svcs[i] = ipvs.Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: ipvs.RoundRobin}
		create.CreateService(svcs[i])
		if i%2 == 1 {
			del.DeleteService(svcs[i])
		} else {
			want = append(want, svcs[i].Addr)
		}
	}
	for _, b := range []*ipvs.Batch{&create, &del} {
		if err := c.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CreateService(ctx, svcs[1]); err != nil {
		t.Fatal(err)
	}
	want = append(want, svcs[1].Addr)
	if err := c.CreateService(ctx, svcs[0]); !errors.Is(err, ipvs.ErrServiceExist) {
		t.Errorf("creating a service twice: %v, want ErrServiceExist", err)
	}
	if _, err := c.GetService(ctx, svcs[3]); !errors.Is(err, ipvs.ErrServiceNotExist) {
		t.Errorf("GetService of a deleted service: %v, want ErrServiceNotExist", err)
	}
	table := k.Table()
	got := make([]netip.Addr, len(table))
	for i, vs := range table {
		got[i] = vs.Service.Addr
	}
	if !slices.Equal(got, want) {
		t.Errorf("table of %d services, want %d in the order created", len(got), len(want))
	}
}
