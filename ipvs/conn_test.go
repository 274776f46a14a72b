package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func backend(i int) Destination {
	return Destination{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080, Weight: 1}
}

func TestOperations(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	c := k.conn()
	defer c.Close()

	svc := Service{Protocol: TCP, Addr: vip4, Port: 80, Scheduler: "rr"}
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
	want.Family, want.Flags, want.Netmask = IPv4, Hashed, 32
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetService: %+v, want %+v", got, want)
	}
	svc.Scheduler, svc.Flags, svc.Timeout = "wlc", Persistent, time.Minute
	if err := c.UpdateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	d := backend(1)
	d.Weight, d.Drained, d.Forward = 0, true, Route
	if err := c.UpdateDestination(ctx, svc, d); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetDestination(ctx, svc, d); err != nil || got.Weight != 0 || !got.Drained || got.Forward != Route {
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
	if err := c.SetTimeouts(ctx, Timeouts{TCP: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if tm, err := c.Timeouts(ctx); err != nil || tm != (Timeouts{TCP: time.Hour, TCPFin: 2 * time.Minute, UDP: 5 * time.Minute}) {
		t.Fatalf("Timeouts: %+v, %v", tm, err)
	}
	if info, err := c.Info(ctx); err != nil || info.Version != (Version{1, 2, 1}) {
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
	k := newFakeKernel()
	k.message = "the kernel's reason"
	c := k.conn()
	defer c.Close()
	svc := Service{Protocol: UDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 53}
	if err := c.CreateService(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDestination(ctx, svc, Destination{Addr: netip.MustParseAddr("2001:db8::2"), Port: 53}); err != nil {
		t.Fatal(err)
	}
	missing := Service{Protocol: UDP, Addr: netip.MustParseAddr("2001:db8::9"), Port: 53}
	tests := []struct {
		name     string
		err      error
		sentinel error
		errno    unix.Errno
		text     string
	}{
		{"duplicate service", c.CreateService(ctx, svc), ErrServiceExists, unix.EEXIST,
			"ipvs: create service UDP [2001:db8::1]:53: service already exists (file exists): the kernel's reason"},
		{"missing service", c.DeleteService(ctx, missing), ErrServiceNotExist, unix.ESRCH,
			"ipvs: delete service UDP [2001:db8::9]:53: service does not exist (no such process): the kernel's reason"},
		{"destination of missing service", c.CreateDestination(ctx, missing, Destination{Addr: netip.MustParseAddr("2001:db8::2")}),
			ErrServiceNotExist, unix.ESRCH, ""},
		{"duplicate destination", c.CreateDestination(ctx, svc, Destination{Addr: netip.MustParseAddr("2001:db8::2"), Port: 53}),
			ErrDestinationExists, unix.EEXIST, ""},
		{"missing destination", c.DeleteDestination(ctx, svc, Destination{Addr: netip.MustParseAddr("2001:db8::3"), Port: 53}),
			ErrDestinationNotExist, unix.ENOENT,
			"ipvs: delete destination UDP [2001:db8::1]:53 -> [2001:db8::3]:53: destination does not exist (no such file or directory): the kernel's reason"},
		{"unknown scheduler", c.CreateService(ctx, Service{Protocol: TCP, Addr: vip4, Port: 1, Scheduler: "nope"}),
			ErrNoScheduler, unix.ENOENT, ""},
		{"get missing service", func() error { _, err := c.GetService(ctx, missing); return err }(), ErrServiceNotExist, unix.ESRCH, ""},
		{"get missing destination", func() error {
			_, err := c.GetDestination(ctx, svc, Destination{Addr: netip.MustParseAddr("2001:db8::3")})
			return err
		}(), ErrDestinationNotExist, unix.ENOENT, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.sentinel) || !errors.Is(tt.err, tt.errno) {
				t.Fatalf("%v: want %v and %v", tt.err, tt.sentinel, tt.errno)
			}
			var oe *OpError
			if !errors.As(tt.err, &oe) {
				t.Fatalf("%T is not an *OpError", tt.err)
			}
			if tt.text != "" && tt.err.Error() != tt.text {
				t.Fatalf("error text\n got %q\nwant %q", tt.err.Error(), tt.text)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		op   op
	}{
		{"no address", op{kind: opCreateService, svc: Service{Protocol: TCP, Port: 80}}},
		{"no protocol", op{kind: opCreateService, svc: Service{Addr: vip4, Port: 80}}},
		{"family mismatch", op{kind: opDeleteService, svc: Service{Family: IPv6, Protocol: TCP, Addr: vip4}}},
		{"fwmark without family", op{kind: opDeleteService, svc: Service{FirewallMark: 1}}},
		{"long scheduler", op{kind: opCreateService, svc: Service{Protocol: TCP, Addr: vip4, Scheduler: "0123456789abcdef"}}},
		{"fractional timeout", op{kind: opCreateService, svc: Service{Protocol: TCP, Addr: vip4, Timeout: 1500 * time.Millisecond}}},
		{"netmask too long", op{kind: opCreateService, svc: Service{Protocol: TCP, Addr: vip4, Netmask: 33}}},
		{"negative weight", op{kind: opCreateDestination, svc: tcp4, dest: Destination{Addr: vip4, Weight: -1}}},
		{"local forwarding", op{kind: opCreateDestination, svc: tcp4, dest: Destination{Addr: vip4, Forward: LocalNode}}},
		{"destination without address", op{kind: opDeleteDestination, svc: tcp4}},
		{"negative timeout", op{kind: opSetTimeouts, timeouts: Timeouts{UDP: -time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op.validate(); err == nil {
				t.Fatal("valid")
			}
		})
	}
}

// A batch of 10,000 operations, some failing: every failure is reported
// with its index, op, object and errno; the rest are applied; it takes a
// few writes.
func TestBatch(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	c := k.conn()
	defer c.Close()

	var b Batch
	b.Grow(2000 * 5)
	if b.Len() != 0 {
		t.Fatalf("Grow added %d operations", b.Len())
	}
	svcs := make([]Service, 2000)
	wantFailed := map[int]error{}
	for i := range svcs {
		svcs[i] = Service{Protocol: TCP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		b.CreateService(svcs[i])
		for j := range 4 {
			if i%500 == 7 && j == 3 {
				// The same destination twice.
				wantFailed[b.Len()] = ErrDestinationExists
				b.CreateDestination(svcs[i], backend(i*4+2))
				continue
			}
			b.CreateDestination(svcs[i], backend(i*4+j))
		}
	}
	missing := Service{Protocol: SCTP, Addr: vip4, Port: 1}
	wantFailed[b.Len()] = ErrServiceNotExist
	b.DeleteService(missing)
	wantFailed[b.Len()] = ErrServiceExists
	b.CreateService(svcs[3])
	wantFailed[b.Len()] = errInvalid
	b.CreateService(Service{Protocol: TCP})
	if b.Len() != 10003 {
		t.Fatalf("batch of %d", b.Len())
	}

	err := c.Apply(ctx, &b)
	var be *BatchError
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
		if want != errInvalid && !errors.Is(f, want) {
			t.Errorf("operation %d: %v, want %v", f.Index, f, want)
		}
		if f.Object == "" || f.Op == "" {
			t.Errorf("operation %d: unnamed %+v", f.Index, f)
		}
	}
	if !errors.Is(err, ErrDestinationExists) || !errors.Is(err, unix.ESRCH) {
		t.Errorf("errors.Is misses a failure: %v", err)
	}
	if len(k.services) != 2000 {
		t.Fatalf("%d services applied", len(k.services))
	}
	for i, fs := range k.services {
		if n := len(fs.dests); n != 4 && !(n == 3 && i%500 == 7) {
			t.Fatalf("%v has %d destinations", fs.svc, n)
		}
	}
	if k.writes > 5 {
		t.Errorf("%d writes for 10,000 operations", k.writes)
	}
	t.Logf("%d operations in %d writes", b.Len(), k.writes)
}

// errInvalid marks an expected validation failure in TestBatch.
var errInvalid = errors.New("invalid")

// With small socket buffers the batch is cut into more writes, and every
// acknowledgement is still collected.
func TestBatchSmallBuffers(t *testing.T) {
	k := newFakeKernel()
	c := newConnWith(k, k.family, 64<<10, 16<<10)
	var b Batch
	for i := range 1000 {
		b.CreateService(Service{Protocol: UDP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 53})
	}
	if err := c.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if len(k.services) != 1000 || k.writes < 30 {
		t.Fatalf("%d services in %d writes", len(k.services), k.writes)
	}
}

// Table pipelines its destination dumps; when one dump needs several
// datagrams, the kernel refuses the next with EBUSY and Table asks again.
func TestTableMultipartDumps(t *testing.T) {
	ctx := context.Background()
	for _, per := range []int{1, 3, 1000} {
		t.Run(fmt.Sprint(per), func(t *testing.T) {
			k := newFakeKernel()
			c := k.conn()
			var b Batch
			want := map[string]int{}
			for i := range 50 {
				s := Service{Protocol: TCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), Port: 80, Scheduler: "wrr"}
				b.CreateService(s)
				for j := range i % 7 {
					b.CreateDestination(s, backend(j))
				}
				want[s.String()] = i % 7
			}
			if err := c.Apply(ctx, &b); err != nil {
				t.Fatal(err)
			}
			k.perDatagram = per
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

// A call cut short by its context reports the context's error for every
// operation whose outcome is unknown, and the next call works.
func TestContextDeadline(t *testing.T) {
	k := newFakeKernel()
	c := k.conn()
	k.stall = true
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var b Batch
	b.CreateService(Service{Protocol: TCP, Addr: vip4, Port: 1, Scheduler: "rr"})
	b.CreateService(Service{Protocol: TCP, Addr: vip4, Port: 2, Scheduler: "rr"})
	err := c.Apply(ctx, &b)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply: %v", err)
	}
	k.stall = false
	if _, err := c.Services(context.Background()); err != nil {
		t.Fatalf("after a deadline: %v", err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := c.Flush(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with a cancelled context: %v", err)
	}
}

// A lost acknowledgement (ENOBUFS) fails the operations still waiting,
// and the connection recovers.
func TestReceiveError(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	c := k.conn()
	k.recvErr = unix.ENOBUFS
	err := c.CreateService(ctx, Service{Protocol: TCP, Addr: vip4, Port: 1, Scheduler: "rr"})
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("CreateService: %v", err)
	}
	if err := c.CreateService(ctx, Service{Protocol: TCP, Addr: vip4, Port: 2, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
}

// Dial looks the family up with the generic netlink controller; a kernel
// without IPVS answers ENOENT, which becomes ErrNotAvailable.
func TestLookupFamily(t *testing.T) {
	tests := []struct {
		name   string
		wantID uint16
		err    error
	}{
		{"present", 0x21, nil},
		{"missing", 0, ErrNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := nl.Serve(func(reqs []netlink.Message) []netlink.Message {
				req := reqs[0]
				if tt.wantID == 0 {
					return []netlink.Message{nl.Ack(req, int(unix.ENOENT), "")}
				}
				w := nl.Writer{B: nl.AppendGenlHeader(nil, 1, 2)}
				w.String(2, "IPVS")
				w.Uint16(1, tt.wantID)
				return []netlink.Message{{Header: netlink.Header{Type: req.Header.Type}, Data: w.B}, nl.Ack(req, 0, "")}
			})
			id, err := lookupFamily(context.Background(), nl.NewConn(fake, 1<<20, 1<<20))
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !errors.Is(err, unix.ENOENT) {
					t.Fatalf("lookupFamily: %v", err)
				}
				return
			}
			if err != nil || id != tt.wantID {
				t.Fatalf("lookupFamily: %d, %v", id, err)
			}
		})
	}
}

// A dump left running by an interrupted call makes the kernel refuse the
// next with EBUSY; the request is sent again once it has ended.
func TestDumpBusy(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	c := k.conn()
	svc := Service{Protocol: TCP, Addr: vip4, Port: 80, Scheduler: "rr"}
	var b Batch
	b.CreateService(svc)
	b.CreateDestination(svc, backend(1))
	if err := c.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	k.perDatagram = 1
	leftover := genetlink.Message{Header: genetlink.Header{Command: cmdNewDest}, Data: wrap(cmdAttrDest, encodeDestinationReply(backend(7)))}
	k.dump = &fakeDump{req: netlink.Message{Header: netlink.Header{Sequence: 1}}, entries: []genetlink.Message{leftover, leftover, leftover}}
	ds, err := c.Destinations(ctx, svc)
	if err != nil || len(ds) != 1 || ds[0].Addr != backend(1).Addr {
		t.Fatalf("Destinations: %v, %v", ds, err)
	}
}

// A destination without a weight gets 1, as ipvsadm gives it: only
// Drained drains, so a forgotten weight cannot.
func TestDestinationWeightDefault(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel()
	c := k.conn()
	svc := Service{Protocol: TCP, Addr: vip4, Port: 80, Scheduler: RoundRobin}
	d := Destination{Addr: netip.MustParseAddr("10.1.0.9"), Port: 80}
	var b Batch
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
