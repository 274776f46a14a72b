package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
	"golang.org/x/sys/unix"
)

// These tests run the real Conn on ipvstest's fake kernel.

var vip4 = netip.MustParseAddr("10.0.0.1")

func backend(i int) ipvs.Destination {
	return ipvs.Destination{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080, Weight: 1}
}

func TestOperations(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()

	svc := ipvs.Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "rr"}
	if err := c.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.CreateDestination(ctx, svc, backend(i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.GetService(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	want := svc
	want.Family, want.Flags, want.Netmask = inet.IPv4, ipvs.Hashed, 32
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetService: %+v, want %+v", got, want)
	}
	svc.Scheduler, svc.Flags, svc.Timeout = "wlc", ipvs.Persistent, time.Minute
	if err := c.UpdateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	d := backend(1)
	d.Weight, d.Drained, d.Forward = 0, true, ipvs.Route
	if err := c.UpdateDestination(ctx, svc, d); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetDestination(ctx, svc, d); err != nil || got.Weight != 0 || !got.Drained || got.Forward != ipvs.Route {
		t.Fatalf("GetDestination: %+v, %v", got, err)
	}
	if err := c.DeleteDestination(ctx, svc, backend(0)); err != nil {
		t.Fatal(err)
	}
	table, err := c.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 1 || table[0].Service.Scheduler != "wlc" || table[0].Service.Timeout != time.Minute || len(table[0].Destinations) != 2 {
		t.Fatalf("Table: %+v", table)
	}
	if err := c.SetTimeouts(ctx, ipvs.Timeouts{TCP: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if tm, err := c.Timeouts(ctx); err != nil || tm != (ipvs.Timeouts{TCP: time.Hour, TCPFin: 2 * time.Minute, UDP: 5 * time.Minute}) {
		t.Fatalf("Timeouts: %+v, %v", tm, err)
	}
	if info, err := c.Info(ctx); err != nil || info.Version != (ipvs.Version{1, 2, 1}) {
		t.Fatalf("Info: %+v, %v", info, err)
	}
	for _, err := range []error{c.Zero(ctx), c.ZeroService(ctx, svc), c.DeleteService(ctx, svc), c.Flush(ctx)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if svcs, err := c.Services(ctx); err != nil || len(svcs) != 0 {
		t.Fatalf("Services after delete: %v, %v", svcs, err)
	}
}

// Each failure maps to its sentinel and keeps the errno and the kernel's
// extended-ack text.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	c := ipvstest.New(&ipvstest.Options{Message: "the kernel's reason"}).Dial()
	defer c.Close()
	svc := ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 53}
	if err := c.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDestination(ctx, svc, ipvs.Destination{Addr: netip.MustParseAddr("2001:db8::2"), Port: 53}); err != nil {
		t.Fatal(err)
	}
	missing := ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("2001:db8::9"), Port: 53}
	tests := []struct {
		name     string
		err      error
		sentinel error
		errno    unix.Errno
		text     string
	}{
		{"duplicate service", c.CreateService(ctx, svc), ipvs.ErrServiceExist, unix.EEXIST,
			"ipvs: create service UDP [2001:db8::1]:53: service already exists (file exists): the kernel's reason"},
		{"missing service", c.DeleteService(ctx, missing), ipvs.ErrServiceNotExist, unix.ESRCH,
			"ipvs: delete service UDP [2001:db8::9]:53: service does not exist (no such process): the kernel's reason"},
		{"destination of missing service", c.CreateDestination(ctx, missing, ipvs.Destination{Addr: netip.MustParseAddr("2001:db8::2")}),
			ipvs.ErrServiceNotExist, unix.ESRCH, ""},
		{"duplicate destination", c.CreateDestination(ctx, svc, ipvs.Destination{Addr: netip.MustParseAddr("2001:db8::2"), Port: 53}),
			ipvs.ErrDestinationExist, unix.EEXIST, ""},
		{"missing destination", c.DeleteDestination(ctx, svc, ipvs.Destination{Addr: netip.MustParseAddr("2001:db8::3"), Port: 53}),
			ipvs.ErrDestinationNotExist, unix.ENOENT,
			"ipvs: delete destination UDP [2001:db8::1]:53 -> [2001:db8::3]:53: destination does not exist (no such file or directory): the kernel's reason"},
		{"unknown scheduler", c.CreateService(ctx, ipvs.Service{Protocol: inet.TCP, Addr: vip4, Port: 1, Scheduler: "nope"}),
			ipvs.ErrSchedulerNotSupported, unix.ENOENT, ""},
		{"get missing service", func() error { _, err := c.GetService(ctx, missing); return err }(), ipvs.ErrServiceNotExist, unix.ESRCH, ""},
		{"get missing destination", func() error {
			_, err := c.GetDestination(ctx, svc, ipvs.Destination{Addr: netip.MustParseAddr("2001:db8::3")})
			return err
		}(), ipvs.ErrDestinationNotExist, unix.ENOENT, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.sentinel) || !errors.Is(tt.err, tt.errno) {
				t.Fatalf("%v: want %v and %v", tt.err, tt.sentinel, tt.errno)
			}
			var oe *ipvs.OpError
			if !errors.As(tt.err, &oe) {
				t.Fatalf("%T is not an *ipvs.OpError", tt.err)
			}
			if tt.text != "" && tt.err.Error() != tt.text {
				t.Fatalf("error text\n got %q\nwant %q", tt.err.Error(), tt.text)
			}
		})
	}
}

// A batch of 10,000 operations, some failing: every failure is reported
// with its index, op, object and errno; the rest are applied; it takes a
// few writes.
func TestBatch(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()

	// 20,000 operations: more than Apply hands the socket at once.
	const services = 4000
	var b ipvs.Batch
	b.Grow(services * 5)
	if b.Len() != 0 {
		t.Fatalf("Grow added %d operations", b.Len())
	}
	svcs := make([]ipvs.Service, services)
	type failure struct {
		err    error
		object string
	}
	wantFailed := map[int]failure{}
	for i := range svcs {
		svcs[i] = ipvs.Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		b.CreateService(svcs[i])
		for j := range 4 {
			if i%500 == 7 && j == 3 {
				// The same destination twice.
				wantFailed[b.Len()] = failure{ipvs.ErrDestinationExist, svcs[i].String() + " -> " + backend(i*4+2).String()}
				b.CreateDestination(svcs[i], backend(i*4+2))
				continue
			}
			b.CreateDestination(svcs[i], backend(i*4+j))
		}
	}
	missing := ipvs.Service{Protocol: inet.SCTP, Addr: vip4, Port: 1}
	wantFailed[b.Len()] = failure{ipvs.ErrServiceNotExist, "SCTP 10.0.0.1:1"}
	b.DeleteService(missing)
	wantFailed[b.Len()] = failure{ipvs.ErrServiceExist, svcs[3].String()}
	b.CreateService(svcs[3])
	wantFailed[b.Len()] = failure{errInvalid, "TCP *:0"}
	b.CreateService(ipvs.Service{Protocol: inet.TCP})
	if b.Len() != services*5+3 {
		t.Fatalf("batch of %d", b.Len())
	}

	err := c.Apply(ctx, &b)
	var be *ipvs.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Apply: %v", err)
	}
	if be.Total != b.Len() || len(be.Failed) != len(wantFailed) {
		t.Fatalf("%d of %d failed, want %d of %d: %v", len(be.Failed), be.Total, len(wantFailed), b.Len(), err)
	}
	for i, f := range be.Failed {
		if i > 0 && f.Index <= be.Failed[i-1].Index {
			t.Errorf("failures out of order: %d after %d", f.Index, be.Failed[i-1].Index)
		}
		want, ok := wantFailed[f.Index]
		if !ok {
			t.Errorf("unexpected failure: %v", f)
			continue
		}
		if want.err != errInvalid && !errors.Is(f, want.err) {
			t.Errorf("operation %d: %v, want %v", f.Index, f, want.err)
		}
		if f.Object != want.object || f.Op == "" {
			t.Errorf("operation %d: %q on %q, want it on %q", f.Index, f.Op, f.Object, want.object)
		}
	}
	if !errors.Is(err, ipvs.ErrDestinationExist) || !errors.Is(err, unix.ESRCH) {
		t.Errorf("errors.Is misses a failure: %v", err)
	}
	table := k.Table()
	if len(table) != services {
		t.Fatalf("%d services applied", len(table))
	}
	for i, vs := range table {
		if n := len(vs.Destinations); n != 4 && !(n == 3 && i%500 == 7) {
			t.Fatalf("%v has %d destinations", vs.Service, n)
		}
	}
	if k.Writes() > 10 {
		t.Errorf("%d writes for %d operations", k.Writes(), b.Len())
	}
	t.Logf("%d operations in %d writes", b.Len(), k.Writes())
}

// With small socket buffers the batch is cut into more writes, and every
// acknowledgement is still collected.
func TestBatchSmallBuffers(t *testing.T) {
	k := ipvstest.New(&ipvstest.Options{ReadBuffer: 64 << 10, WriteBuffer: 16 << 10})
	c := k.Dial()
	var b ipvs.Batch
	for i := range 1000 {
		b.CreateService(ipvs.Service{Protocol: inet.UDP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 53})
	}
	if err := c.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if len(k.Table()) != 1000 || k.Writes() < 30 {
		t.Fatalf("%d services in %d writes", len(k.Table()), k.Writes())
	}
}

// Table pipelines its destination dumps; when one dump needs several
// datagrams, the kernel refuses the next with EBUSY and Table asks again.
func TestTableMultipartDumps(t *testing.T) {
	ctx := context.Background()
	for _, per := range []int{1, 3, 1000} {
		t.Run(fmt.Sprint(per), func(t *testing.T) {
			c := ipvstest.New(&ipvstest.Options{DumpPart: per}).Dial()
			var b ipvs.Batch
			want := map[string]int{}
			for i := range 50 {
				s := ipvs.Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), Port: 80, Scheduler: "wrr"}
				b.CreateService(s)
				for j := range i % 7 {
					b.CreateDestination(s, backend(j))
				}
				want[s.String()] = i % 7
			}
			if err := c.Apply(ctx, &b); err != nil {
				t.Fatal(err)
			}
			table, err := c.Table(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(table) != len(want) {
				t.Fatalf("%d services", len(table))
			}
			for _, vs := range table {
				if len(vs.Destinations) != want[vs.Service.String()] {
					t.Fatalf("%v: %d destinations, want %d", vs.Service, len(vs.Destinations), want[vs.Service.String()])
				}
			}
		})
	}
}

// A destination without a weight gets 1, as ipvsadm gives it: only
// Drained drains, so a forgotten weight cannot.
func TestDestinationWeightDefault(t *testing.T) {
	ctx := context.Background()
	k := ipvstest.New(nil)
	c := k.Dial()
	svc := ipvs.Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: ipvs.RoundRobin}
	d := ipvs.Destination{Addr: netip.MustParseAddr("10.1.0.9"), Port: 80}
	var b ipvs.Batch
	b.CreateService(svc)
	b.CreateDestination(svc, d)
	if err := c.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetDestination(ctx, svc, d); err != nil || got.Weight != 1 || got.Drained {
		t.Fatalf("GetDestination: %+v, %v; want weight 1", got, err)
	}
	d.Weight = 2
	d.Drained = true
	if err := c.UpdateDestination(ctx, svc, d); err == nil {
		t.Error("a drained destination with a weight was accepted")
	}
}

// errInvalid marks an expected validation failure in TestBatch.
var errInvalid = errors.New("invalid")
