package nl

import (
	"errors"
	"syscall"

	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/mdlayher/netlink"
)

// Request is one message to the kernel and, after an exchange, its
// outcome.
type Request struct {
	// Type and Flags go in the message's header; netlink.Request is added.
	// With netlink.Acknowledge the kernel acknowledges the request; with
	// netlink.Dump it answers with parts ended by NLMSG_DONE. A request
	// with neither is answered only when it fails, and known to have
	// succeeded once a later request of the same write is answered.
	Type  uint16
	Flags netlink.HeaderFlags
	// Data is the payload: the family's header, then attributes.
	Data []byte

	// Handle, when set, is given each reply as it arrives, in place of
	// keeping it in Replies: a large dump is then read in constant memory.
	Handle func(m netlink.Message)

	// Replies are the kernel's messages for the request, acknowledgements
	// and NLMSG_DONE excluded.
	Replies []netlink.Message
	// Err is an *Error when the kernel refused the request, or the
	// exchange's error when it broke off before the outcome was known.
	Err  error
	done bool
}

// answered says whether the kernel sends the request a final message
// whatever its outcome.
func (r *Request) answered() bool {
	return r.Flags&netlink.Acknowledge != 0 || r.isDump()
}

// isDump says whether the request asks for a dump: NLM_F_DUMP is two
// bits, one of which, NLM_F_EXCL, a change may carry alone.
func (r *Request) isDump() bool { return r.Flags&netlink.Dump == netlink.Dump }

// Receive-buffer space budgeted per request: an acknowledgement skb is
// well under 2 KiB, a get's reply a few; a dump's first reply skb is up
// to 32 KiB of data. A request's own length is added for the kernels
// that echo a refused request whole (ipset's bulk errors do).
const (
	ackCost  = 2 << 10
	getCost  = 8 << 10
	dumpCost = 40 << 10
)

func (r *Request) cost() int {
	switch {
	case r.isDump():
		return dumpCost
	case r.Flags&netlink.Acknowledge != 0:
		return getCost + len(r.Data)
	}
	return ackCost + len(r.Data)
}

// exchange sends the requests in as few writes as the socket buffers
// allow and collects every reply. Each write's replies are read before the
// next write, so the receive buffer never overflows.
func (c *Conn) exchange(reqs []*Request, hook fault.Hook) error {
	queue := reqs
	for len(queue) > 0 {
		n, bytes, cost := 0, 0, 0
		for n < len(queue) {
			// One dump at a time: the kernel runs one per socket, and
			// ends each only when its first part has been read.
			if n > 0 && (queue[n].isDump() || queue[n-1].isDump()) {
				break
			}
			b := HeaderLen + Align(len(queue[n].Data))
			k := queue[n].cost()
			if n > 0 && (bytes+b > c.sendBudget || cost+k > c.recvBudget) {
				break
			}
			bytes, cost, n = bytes+b, cost+k, n+1
		}
		retry, err := c.roundTrip(queue[:n], hook)
		if err != nil {
			failAll(queue, err)
			return err
		}
		// Retried dumps go first: requests keep their relative order.
		// Without any, the queue is only resliced: copying the rest after
		// every write made a read of the table, a dump per virtual
		// server, quadratic.
		if len(retry) > 0 {
			queue = append(retry, queue[n:]...)
		} else {
			queue = queue[n:]
		}
	}
	return nil
}

// roundTrip writes one chunk and reads until every request in it is
// answered. The last request of a write always asks for an
// acknowledgement: the kernel answers a failed request whether asked or
// not (netlink_rcv_skb), and handles a write's requests in order, so when
// the last one is answered every request without an error reply has
// succeeded. Dumps the kernel refused with EBUSY (a dump left running by
// an interrupted exchange) are returned for another round.
func (c *Conn) roundTrip(chunk []*Request, hook fault.Hook) (retry []*Request, err error) {
	if chunk = c.injectFaults(chunk, hook); len(chunk) == 0 {
		return nil, nil
	}
	last := len(chunk) - 1
	pending := 0
	base := c.seq + 1
	c.wbuf = c.wbuf[:0]
	for i, r := range chunk {
		c.seq++
		flags := netlink.Request | r.Flags
		if i == last && !r.isDump() {
			flags |= netlink.Acknowledge
		}
		c.wbuf = AppendMessage(c.wbuf, r.Type, flags, c.seq, 0, r.Data)
		if r.answered() || i == last {
			pending++
		}
	}
	if err := c.t.Send(c.wbuf); err != nil {
		return nil, err
	}
	for pending > 0 {
		dgram, err := c.t.Receive()
		if err != nil {
			return nil, err
		}
		for _, m := range dgram {
			// Sequence numbers of one write are consecutive; anything
			// else is a stale reply to an interrupted exchange.
			i := m.Header.Sequence - base
			if i >= uint32(len(chunk)) || chunk[i].done {
				continue
			}
			r := chunk[i]
			if m.Header.Type != netlink.Error && m.Header.Type != netlink.Done {
				if r.Handle != nil {
					r.Handle(m)
				} else {
					r.Replies = append(r.Replies, m)
				}
				continue
			}
			ke, perr := ParseError(m)
			switch {
			case perr != nil:
				r.Err = perr
			case ke != nil && ke.Errno == syscall.EBUSY && r.isDump():
				retry = append(retry, r)
			case ke != nil:
				r.Err = ke
			}
			r.done = true
			if r.answered() || i == uint32(last) {
				pending--
			}
		}
	}
	for _, r := range chunk {
		r.done = true
	}
	for _, r := range retry {
		r.done, r.Replies = false, nil
	}
	return retry, nil
}

// injectFaults asks the fault hook about each request of a chunk and
// returns those it lets through; the others are done, failed with its
// error as if the kernel had answered it.
func (c *Conn) injectFaults(chunk []*Request, hook fault.Hook) []*Request {
	if hook == nil {
		return chunk
	}
	pass := chunk[:0:0]
	for _, r := range chunk {
		var err error
		if name := c.name(r); name != "" {
			err = hook(c.pkg, name)
		}
		if err == nil {
			pass = append(pass, r)
			continue
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = &Error{Errno: errno}
		}
		r.Err, r.done = err, true
	}
	return pass
}
