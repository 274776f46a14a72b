package conntrack

import (
	"errors"
	"slices"

	"github.com/mdlayher/netlink"
)

// batchSize is how many requests go in one write. The kernel answers each
// refused request with its own datagram (about 800 bytes of receive buffer
// each with capped acks); 128 of them fit the default 208 KiB buffer.
const batchSize = 128

// rejection is the kernel's refusal of one request of a batch.
type rejection struct {
	index int
	err   error
}

// sendBatch writes msgs in one sendmsg, the last asking for an ack, and
// waits for that ack. The kernel handles the requests in order and reports
// each failure as it goes, so every refusal arrives before the final ack.
//
// Messages the fault hook fails are not sent: they are rejected with the
// hook's error.
func (c *Conn) sendBatch(msgs []netlink.Message) ([]rejection, error) {
	if c.fault == nil {
		return c.sendAll(msgs)
	}
	var rejected []rejection
	pass := make([]netlink.Message, 0, len(msgs))
	var orig []int
	for i, m := range msgs {
		if err := c.injectFault(m); err != nil {
			rejected = append(rejected, rejection{index: i, err: err})
			continue
		}
		pass = append(pass, m)
		orig = append(orig, i)
	}
	if len(pass) == 0 {
		return rejected, nil
	}
	more, err := c.sendAll(pass)
	for _, r := range more {
		r.index = orig[r.index]
		rejected = append(rejected, r)
	}
	slices.SortFunc(rejected, func(a, b rejection) int { return a.index - b.index })
	return rejected, err
}

func (c *Conn) sendAll(msgs []netlink.Message) ([]rejection, error) {
	msgs[len(msgs)-1].Header.Flags |= netlink.Acknowledge
	sent, err := c.nl.SendMessages(msgs)
	if err != nil {
		return nil, err
	}
	last := sent[len(sent)-1].Header.Sequence
	indexOf := func(seq uint32) int {
		for i := range sent {
			if sent[i].Header.Sequence == seq {
				return i
			}
		}
		return -1
	}
	var rejected []rejection
	for {
		replies, err := c.nl.Receive()
		if err != nil {
			var oe *netlink.OpError
			if !errors.As(err, &oe) || oe.Sequence == 0 {
				return rejected, err
			}
			i := indexOf(oe.Sequence)
			if i < 0 {
				continue
			}
			rejected = append(rejected, rejection{index: i, err: err})
			if oe.Sequence == last {
				return rejected, nil
			}
			continue
		}
		for _, m := range replies {
			if m.Header.Type == netlink.Error && m.Header.Sequence == last {
				return rejected, nil
			}
		}
	}
}
