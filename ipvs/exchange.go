package ipvs

import (
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// requestKind says how the kernel answers a request.
type requestKind uint8

const (
	// reqChange: an acknowledgement, success or error.
	reqChange requestKind = iota
	// reqGet: one reply message, then an acknowledgement.
	reqGet
	// reqDump: reply messages ended by NLMSG_DONE, or an error.
	reqDump
)

// Receive-buffer space budgeted per request: an acknowledgement skb is
// well under 2 KiB; a dump's first reply skb is up to 32 KiB of data.
const (
	ackCost  = 2 << 10
	getCost  = 8 << 10
	dumpCost = 40 << 10
)

func (k requestKind) cost() int {
	switch k {
	case reqGet:
		return getCost
	case reqDump:
		return dumpCost
	}
	return ackCost
}

// request is one message to the kernel and, after the exchange, its
// outcome.
type request struct {
	kind    requestKind
	command uint8
	attrs   []byte

	done    bool
	replies []genetlink.Message
	// err is a *kernelError, or the transport's error when the exchange
	// broke off before the request's outcome was known.
	err error
}

func (r *request) message(family uint16) netlink.Message {
	flags := netlink.Request
	switch r.kind {
	case reqDump:
		flags |= netlink.Dump
	default:
		flags |= netlink.Acknowledge
	}
	data := make([]byte, 4, 4+len(r.attrs))
	data[0], data[1] = r.command, genlVersion
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(family), Flags: flags},
		Data:   append(data, r.attrs...),
	}
}

// exchange sends the requests in as few writes as the socket buffers
// allow and collects every reply. Each write's replies are read before the
// next write, so the receive buffer never overflows. It returns an error
// only when the exchange itself broke off; requests whose outcome is then
// unknown carry that error.
func (c *Conn) exchange(reqs []*request) error {
	queue := reqs
	for len(queue) > 0 {
		n, bytes, cost := 0, 0, 0
		for n < len(queue) {
			b := nlmsgHdrLen + 4 + len(queue[n].attrs)
			k := queue[n].kind.cost()
			if n > 0 && (bytes+b > c.sendBudget || cost+k > c.recvBudget) {
				break
			}
			bytes, cost, n = bytes+b, cost+k, n+1
		}
		chunk := queue[:n]
		retry, err := c.roundTrip(chunk)
		if err != nil {
			failAll(queue, err)
			return err
		}
		// Retried dumps go first: requests keep their relative order.
		queue = append(retry, queue[n:]...)
	}
	return nil
}

// roundTrip writes one chunk and reads until every request in it is
// answered. Dumps the kernel refused with EBUSY (one dump at a time per
// socket, and an earlier one in the chunk needed more than one datagram)
// are returned for another round.
func (c *Conn) roundTrip(chunk []*request) (retry []*request, err error) {
	msgs := make([]netlink.Message, len(chunk))
	for i, r := range chunk {
		msgs[i] = r.message(c.family)
	}
	sent, err := c.t.SendMessages(msgs)
	if err != nil {
		return nil, err
	}
	base := sent[0].Header.Sequence
	pending := len(chunk)
	for pending > 0 {
		dgram, err := c.t.receive()
		if err != nil {
			return nil, err
		}
		for _, m := range dgram {
			// Sequence numbers of one write are consecutive; anything
			// else is a stale reply to an interrupted call.
			i := m.Header.Sequence - base
			if i >= uint32(len(chunk)) || chunk[i].done {
				continue
			}
			r := chunk[i]
			switch m.Header.Type {
			case netlink.Error, netlink.Done:
				ke, perr := parseStatus(m)
				switch {
				case perr != nil:
					r.err = perr
				case ke != nil && ke.errno == unix.EBUSY && r.kind == reqDump:
					retry = append(retry, r)
				case ke != nil:
					r.err = ke
				}
				r.done = true
				pending--
			default:
				var gm genetlink.Message
				if err := gm.UnmarshalBinary(m.Data); err != nil {
					r.err = fmt.Errorf("reply: %w", err)
					continue
				}
				r.replies = append(r.replies, gm)
			}
		}
	}
	for _, r := range retry {
		r.done = false
	}
	return retry, nil
}
