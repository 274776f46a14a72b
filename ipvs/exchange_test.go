package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// These tests script the socket to check how a Conn copes with what a
// kernel rarely does (stalls, lost replies, busy dumps); what the kernel
// does with the table is tested on ipvstest's fake, in conn_test.go.

// socket wraps a scripted transport: it counts the datagrams read, and
// its next Receive fails with failNext when that is set.
type socket struct {
	nl.Transport
	reads    atomic.Int32
	failNext error
}

func (s *socket) Receive() ([]netlink.Message, error) {
	if err := s.failNext; err != nil {
		s.failNext = nil
		return nil, err
	}
	s.reads.Add(1)
	return s.Transport.Receive()
}

// scripted returns a Conn on a socket whose kernel is handle.
func scripted(handle func(req netlink.Message) []netlink.Message) (*Conn, *socket) {
	s := &socket{Transport: nl.Serve(func(reqs []netlink.Message) []netlink.Message {
		var out []netlink.Message
		for _, r := range reqs {
			out = append(out, handle(r)...)
		}
		return out
	})}
	return newConn(nl.NewConn(s, 1<<20, 1<<20), 0x20), s
}

// succeed answers a request as the kernel does when it succeeds and there
// is nothing to list: an acknowledgement if asked for, an empty dump.
func succeed(req netlink.Message) []netlink.Message {
	switch {
	case req.Header.Flags&netlink.Dump == netlink.Dump:
		return []netlink.Message{dumpDone(req.Header.Sequence)}
	case req.Header.Flags&netlink.Acknowledge != 0:
		return []netlink.Message{nl.Ack(req, 0, "")}
	}
	return nil
}

func dumpDone(seq uint32) netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: seq}, Data: make([]byte, 4)}
}

// A call cut short by its context reports the context's error for every
// operation whose outcome is unknown, and the next call works.
func TestContextDeadline(t *testing.T) {
	var stall atomic.Bool
	stall.Store(true)
	c, _ := scripted(func(req netlink.Message) []netlink.Message {
		if stall.Load() {
			return nil
		}
		return succeed(req)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var b Batch
	b.CreateService(Service{Protocol: inet.TCP, Addr: vip4, Port: 1, Scheduler: "rr"})
	b.CreateService(Service{Protocol: inet.TCP, Addr: vip4, Port: 2, Scheduler: "rr"})
	err := c.Apply(ctx, &b)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Apply: %v", err)
	}
	stall.Store(false)
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
	c, s := scripted(succeed)
	s.failNext = unix.ENOBUFS
	err := c.CreateService(ctx, Service{Protocol: inet.TCP, Addr: vip4, Port: 1, Scheduler: "rr"})
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("CreateService: %v", err)
	}
	if err := c.CreateService(ctx, Service{Protocol: inet.TCP, Addr: vip4, Port: 2, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
}

// Once the socket fails, the rest of a batch too large to hand it at once
// is not sent: it fails with the same error, and the connection recovers.
func TestBatchAfterReceiveError(t *testing.T) {
	var received atomic.Int32
	c, s := scripted(func(req netlink.Message) []netlink.Message {
		received.Add(1)
		return succeed(req)
	})
	var b Batch
	n := applyWindow + 10
	for i := range n {
		b.CreateDestination(tcp4, backend(i))
	}
	s.failNext = unix.ENOBUFS
	err := c.Apply(context.Background(), &b)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != n || !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Apply: %v", err)
	}
	if last := be.Failed[len(be.Failed)-1]; last.Index != n-1 || !errors.Is(last, unix.ENOBUFS) {
		t.Errorf("the last operation: %v", last)
	}
	if got := int(received.Load()); got > applyWindow {
		t.Errorf("the kernel received %d requests after the socket failed in the first write of %d", got, applyWindow)
	}
	if err := c.CreateService(context.Background(), Service{Protocol: inet.TCP, Addr: vip4, Port: 2, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
}

// A dump left running by an interrupted call makes the kernel refuse the
// next with EBUSY until the old one is read to its end; the request is
// sent again until it goes through.
func TestDumpBusy(t *testing.T) {
	svc := Service{Protocol: inet.TCP, Addr: vip4, Port: 80, Scheduler: "rr"}
	entry := func(seq uint32, d Destination) netlink.Message {
		b := append(nl.AppendGenlHeader(nil, cmdNewDest, genlVersion), wrap(cmdAttrDest, encodeDestinationReply(d))...)
		return netlink.Message{Header: netlink.Header{Type: 0x20, Flags: netlink.Multi, Sequence: seq}, Data: b}
	}
	// The old dump, of sequence number 1: three parts and its end.
	old := []netlink.Message{entry(1, backend(7)), entry(1, backend(7)), entry(1, backend(7)), dumpDone(1)}
	// s is declared first for the kernel to see how much was read.
	var s *socket
	started := false
	c, s := scripted(func(req netlink.Message) []netlink.Message {
		if !started {
			started = true
			return append([]netlink.Message{nl.Ack(req, int(unix.EBUSY), "")}, old...)
		}
		if s.reads.Load() <= int32(len(old)) {
			return []netlink.Message{nl.Ack(req, int(unix.EBUSY), "")}
		}
		return []netlink.Message{entry(req.Header.Sequence, backend(1)), dumpDone(req.Header.Sequence)}
	})
	ds, err := c.Destinations(context.Background(), svc)
	if err != nil || len(ds) != 1 || ds[0].Addr != backend(1).Addr {
		t.Fatalf("Destinations: %v, %v", ds, err)
	}
}

func backend(i int) Destination {
	return Destination{Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080, Weight: 1}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		op   op
	}{
		{"no address", op{kind: opCreateService, svc: Service{Protocol: inet.TCP, Port: 80}}},
		{"no protocol", op{kind: opCreateService, svc: Service{Addr: vip4, Port: 80}}},
		{"family mismatch", op{kind: opDeleteService, svc: Service{Family: inet.IPv6, Protocol: inet.TCP, Addr: vip4}}},
		{"fwmark without family", op{kind: opDeleteService, svc: Service{FirewallMark: 1}}},
		{"long scheduler", op{kind: opCreateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Scheduler: "0123456789abcdef"}}},
		{"fractional timeout", op{kind: opCreateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Timeout: 1500 * time.Millisecond}}},
		{"netmask too long", op{kind: opCreateService, svc: Service{Protocol: inet.TCP, Addr: vip4, Netmask: 33}}},
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

// Dial looks the family up with the generic netlink controller; a kernel
// without IPVS answers ENOENT, which becomes ErrNotSupported.
func TestLookupFamily(t *testing.T) {
	tests := []struct {
		name   string
		wantID uint16
		err    error
	}{
		{"present", 0x21, nil},
		{"missing", 0, ErrNotSupported},
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
