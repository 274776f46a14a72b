package nl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A batch's requests each get their own outcome: the kernel answers only
// the failures and the last request, which alone asks for an
// acknowledgement, and the extended-ack text stays with its errno.
func TestExchangeOutcomes(t *testing.T) {
	var writes [][]netlink.Message
	c := NewConn(Serve(func(reqs []netlink.Message) []netlink.Message {
		writes = append(writes, reqs)
		var out []netlink.Message
		for i, req := range reqs {
			switch {
			case i%3 == 1:
				out = append(out, Ack(req, int(unix.EEXIST), "already there"))
			case req.Header.Flags&netlink.Acknowledge != 0:
				out = append(out, Ack(req, 0, ""))
			}
		}
		return out
	}), 1<<20, 1<<20)
	reqs := make([]*Request, 7)
	for i := range reqs {
		// NLM_F_EXCL is one of NLM_F_DUMP's two bits: not a dump.
		reqs[i] = &Request{Type: 42, Flags: netlink.Create | netlink.Excl, Data: []byte{byte(i), 0, 0, 0}}
	}
	if err := c.Exchange(context.Background(), reqs...); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 1 || len(writes[0]) != 7 {
		t.Fatalf("%d writes, want one of 7 requests", len(writes))
	}
	for i, m := range writes[0] {
		if ack := m.Header.Flags&netlink.Acknowledge != 0; ack != (i == 6) {
			t.Errorf("request %d asks for an ack: %v", i, ack)
		}
	}
	for i, r := range reqs {
		var ke *Error
		failed := errors.As(r.Err, &ke)
		if failed != (i%3 == 1) {
			t.Errorf("request %d: %v", i, r.Err)
		}
		if failed && (!errors.Is(r.Err, unix.EEXIST) || ke.Message != "already there" || r.Err.Error() != "file exists: already there") {
			t.Errorf("request %d: %v", i, r.Err)
		}
	}
}

// A cancelled exchange returns the context's error at once; the next one
// reads its own answer, not the late answer to the cancelled request.
func TestExchangeCancelThenReuse(t *testing.T) {
	var held []netlink.Message
	c := NewConn(Serve(func(reqs []netlink.Message) []netlink.Message {
		if len(held) == 0 {
			// The kernel is slow with the first request's answer.
			held = reqs
			return nil
		}
		// The late answer arrives with the next request's.
		return []netlink.Message{Ack(held[0], int(unix.EEXIST), ""), Ack(reqs[0], int(unix.ENOENT), "")}
	}), 1<<20, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	first := &Request{Type: 42, Data: make([]byte, 4)}
	start := time.Now()
	if err := c.Exchange(ctx, first); !errors.Is(err, context.Canceled) || !errors.Is(first.Err, context.Canceled) {
		t.Fatalf("cancelled exchange: %v, request %v", err, first.Err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	second := &Request{Type: 42, Data: make([]byte, 4)}
	if err := c.Exchange(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second.Err, unix.ENOENT) {
		t.Errorf("second request: %v, want its own ENOENT", second.Err)
	}
}

// A context whose deadline passes mid-exchange ends it with
// context.DeadlineExceeded, not the socket's timeout.
func TestExchangeDeadline(t *testing.T) {
	c := NewConn(Serve(func([]netlink.Message) []netlink.Message { return nil }), 1<<20, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := &Request{Type: 42}
	if err := c.Exchange(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exchange: %v, want context.DeadlineExceeded", err)
	}
}

// noDeadline is a transport whose deadlines cannot be set.
type noDeadline struct{ Transport }

func (noDeadline) SetDeadline(time.Time) error { return errors.ErrUnsupported }

// Without a deadline the context could not interrupt the exchange: it
// fails rather than run uncancellable, and sends nothing.
func TestExchangeRefusesWithoutDeadline(t *testing.T) {
	sent := 0
	c := NewConn(noDeadline{Serve(func(reqs []netlink.Message) []netlink.Message {
		sent++
		return []netlink.Message{Ack(reqs[0], 0, "")}
	})}, 1<<20, 1<<20)
	r := &Request{Type: 42}
	if err := c.Exchange(context.Background(), r); !errors.Is(err, errors.ErrUnsupported) || r.Err == nil || sent != 0 {
		t.Errorf("Exchange: %v, request %v, %d writes", err, r.Err, sent)
	}
}

// Dumps go one per write, their parts collected or handed to Handle.
func TestExchangeDumps(t *testing.T) {
	c := NewConn(Serve(func(reqs []netlink.Message) []netlink.Message {
		if len(reqs) != 1 {
			t.Errorf("%d requests in a write with a dump", len(reqs))
		}
		req := reqs[0]
		part := netlink.Message{Header: netlink.Header{Type: 43, Flags: netlink.Multi, Sequence: req.Header.Sequence}, Data: []byte{1, 2, 3, 4}}
		done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: req.Header.Sequence}, Data: make([]byte, 4)}
		return []netlink.Message{part, part, done}
	}), 1<<20, 1<<20)
	kept := &Request{Type: 42, Flags: netlink.Dump}
	handled := 0
	streamed := &Request{Type: 42, Flags: netlink.Dump, Handle: func(netlink.Message) { handled++ }}
	if err := c.Exchange(context.Background(), kept, streamed); err != nil {
		t.Fatal(err)
	}
	if len(kept.Replies) != 2 || handled != 2 || len(streamed.Replies) != 0 || kept.Err != nil || streamed.Err != nil {
		t.Errorf("kept %d replies (%v), handled %d (%v)", len(kept.Replies), kept.Err, handled, streamed.Err)
	}
}

// A fault hook on the context fails the requests it picks as the kernel would; the
// others of the same write go through.
func TestExchangeFault(t *testing.T) {
	sent := 0
	c := NewConn(Serve(func(reqs []netlink.Message) []netlink.Message {
		sent += len(reqs)
		return []netlink.Message{Ack(reqs[len(reqs)-1], 0, "")}
	}), 1<<20, 1<<20)
	c.NameRequests("test", func(r *Request) string { return fmt.Sprint(r.Data[0]) })
	ctx := fault.With(context.Background(), func(pkg, req string) error {
		if pkg == "test" && req == "1" {
			return unix.ENOBUFS
		}
		return nil
	})
	reqs := []*Request{{Type: 42, Data: []byte{0}}, {Type: 42, Data: []byte{1}}, {Type: 42, Data: []byte{2}}}
	if err := c.Exchange(ctx, reqs...); err != nil {
		t.Fatal(err)
	}
	var ke *Error
	if reqs[0].Err != nil || !errors.As(reqs[1].Err, &ke) || ke.Errno != unix.ENOBUFS || reqs[2].Err != nil || sent != 2 {
		t.Errorf("outcomes %v %v %v, %d sent", reqs[0].Err, reqs[1].Err, reqs[2].Err, sent)
	}
}
