package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// exchange sends one request and returns its replies: up to the ack when
// the request asks for one, else the first reply. The kernel flags the reply
// to a get or a statistics request NLM_F_MULTI yet ends it with no
// NLMSG_DONE, which would leave netlink.Conn.Receive waiting for more; so
// replies are read here, one datagram at a time through the raw socket,
// with the socket's deadline still in force.
func (c *Conn) exchange(req netlink.Message) ([]netlink.Message, error) {
	if err := c.injectFault(req); err != nil {
		return nil, err
	}
	sent, err := c.nl.Send(req)
	if err != nil {
		return nil, err
	}
	rc, err := c.nl.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, recvBufferSize)
	var out []netlink.Message
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, &netlink.OpError{Op: "receive", Err: err}
		}
		// Replies outlive the buffer, which the next read overwrites.
		msgs, err := parseDatagram(append([]byte(nil), buf[:n]...))
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Sequence != sent.Header.Sequence {
				continue
			}
			if m.Header.Type == netlink.Error {
				return out, errorMessage(m)
			}
			out = append(out, m)
			if req.Header.Flags&netlink.Acknowledge == 0 {
				return out, nil
			}
		}
	}
}

// drain discards whatever the socket holds, without waiting.
func (c *Conn) drain() error {
	rc, err := c.nl.SyscallConn()
	if err != nil {
		return err
	}
	var buf [4096]byte
	for {
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			// MSG_TRUNC drops the rest of a datagram larger than buf.
			_, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			return true
		})
		switch {
		case err != nil:
			return err
		case rerr == unix.EAGAIN:
			return nil
		case rerr != nil && rerr != unix.ENOBUFS:
			return rerr
		}
	}
}

// parseDatagram splits a datagram into its messages.
func parseDatagram(b []byte) ([]netlink.Message, error) {
	var msgs []netlink.Message
	for len(b) >= 16 {
		l := int(binary.NativeEndian.Uint32(b))
		if l < 16 || l > len(b) {
			return nil, errors.New("malformed netlink message length")
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:l]); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
		b = b[min(len(b), (l+3)&^3):]
	}
	return msgs, nil
}

// errorMessage returns nil for an ack and otherwise the errno the message
// carries, with the kernel's extended-ack text, as a *netlink.OpError.
func errorMessage(m netlink.Message) error {
	if len(m.Data) < 4 {
		return &netlink.OpError{Op: "receive", Err: errors.New("short netlink error message")}
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	oe := &netlink.OpError{Op: "receive", Err: unix.Errno(-code), Sequence: m.Header.Sequence}
	if m.Header.Flags&flagAckTLVs == 0 || len(m.Data) < 20 {
		return oe
	}
	off := 20
	if m.Header.Flags&flagCapped == 0 {
		off = 4 + int(binary.NativeEndian.Uint32(m.Data[4:]))
	}
	if off < 20 || off > len(m.Data) {
		return oe
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[off:])
	if err != nil {
		return oe
	}
	for ad.Next() {
		if ad.Type() == attrMsg {
			oe.Message = ad.String()
		}
	}
	return oe
}

// injectFault asks the fault hook, if any, about a request, and returns
// its error as the kernel's refusal would come.
func (c *Conn) injectFault(req netlink.Message) error {
	if c.fault == nil {
		return nil
	}
	err := c.fault(messageName(uint8(req.Header.Type)))
	if err == nil {
		return nil
	}
	return &netlink.OpError{Op: "receive", Err: err, Sequence: req.Header.Sequence}
}

// messageName names a ctnetlink message type for the fault hook.
func messageName(typ uint8) string {
	switch typ {
	case msgNew:
		return "new"
	case msgGet:
		return "get"
	case msgDelete:
		return "delete"
	case msgGetStats:
		return "get stats"
	}
	return fmt.Sprintf("message %d", typ)
}
