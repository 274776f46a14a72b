package ipvs

import (
	"encoding/binary"
	"errors"
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

// flags returns the request's netlink header flags; ack asks for an
// acknowledgement of a change.
func (r *request) flags(ack bool) netlink.HeaderFlags {
	switch {
	case r.kind == reqDump:
		return netlink.Request | netlink.Dump
	case ack || r.kind == reqGet:
		return netlink.Request | netlink.Acknowledge
	}
	return netlink.Request
}

// appendRequest frames a request: struct nlmsghdr, struct genlmsghdr, the
// attributes. The kernel fills in the port id.
func appendRequest(b []byte, family uint16, flags netlink.HeaderFlags, seq uint32, r *request) []byte {
	b = binary.NativeEndian.AppendUint32(b, uint32(nlmsgHdrLen+4+len(r.attrs)))
	b = binary.NativeEndian.AppendUint16(b, family)
	b = binary.NativeEndian.AppendUint16(b, uint16(flags))
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, r.command, genlVersion, 0, 0)
	return append(b, r.attrs...)
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
			// One dump at a time: the kernel runs one per socket, and
			// ends each only when its first part has been read.
			if n > 0 && (queue[n].kind == reqDump || queue[n-1].kind == reqDump) {
				break
			}
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
// answered. Only the last change of a write asks for an acknowledgement:
// the kernel answers a failed request whether asked or not
// (netlink_rcv_skb), and handles a write's requests in order, so when the
// last one is answered every change without an error reply has succeeded.
// That spares the kernel an acknowledgement and this side a receive per
// change. The receive budget still counts an error reply for every
// change, so even a chunk that fails throughout is not lost to ENOBUFS.
// Dumps the kernel refused with EBUSY (a dump left running by an
// interrupted call) are returned for another round.
func (c *Conn) roundTrip(chunk []*request) (retry []*request, err error) {
	if chunk = c.injectFaults(chunk); len(chunk) == 0 {
		return nil, nil
	}
	last := len(chunk) - 1
	pending := 0
	base := c.seq + 1
	c.wbuf = c.wbuf[:0]
	for i, r := range chunk {
		c.seq++
		c.wbuf = appendRequest(c.wbuf, c.family, r.flags(i == last), c.seq, r)
		if r.kind != reqChange || i == last {
			pending++
		}
	}
	if err := c.t.send(c.wbuf); err != nil {
		return nil, err
	}
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
				if r.kind != reqChange || i == uint32(last) {
					pending--
				}
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
	for _, r := range chunk {
		r.done = true
	}
	for _, r := range retry {
		r.done = false
	}
	return retry, nil
}

// commandName names a command for the fault hook.
func commandName(cmd uint8) string {
	switch cmd {
	case cmdNewService:
		return "new service"
	case cmdSetService:
		return "set service"
	case cmdDelService:
		return "delete service"
	case cmdGetService:
		return "get service"
	case cmdNewDest:
		return "new destination"
	case cmdSetDest:
		return "set destination"
	case cmdDelDest:
		return "delete destination"
	case cmdGetDest:
		return "get destination"
	case cmdSetConfig:
		return "set config"
	case cmdGetConfig:
		return "get config"
	case cmdGetInfo:
		return "get info"
	case cmdZero:
		return "zero"
	case cmdFlush:
		return "flush"
	}
	return fmt.Sprintf("command %d", cmd)
}

// injectFaults asks the fault hook about each request of a chunk and
// returns those it lets through; the others are done, failed with the
// hook's error as if the kernel had answered it.
func (c *Conn) injectFaults(chunk []*request) []*request {
	if c.fault == nil {
		return chunk
	}
	pass := chunk[:0:0]
	for _, r := range chunk {
		err := c.fault(commandName(r.command))
		if err == nil {
			pass = append(pass, r)
			continue
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			err = &kernelError{errno: errno}
		}
		r.err, r.done = err, true
	}
	return pass
}
