package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// statsExchange asks for the global counters. The kernel flags its one
// reply NLM_F_MULTI yet sends no NLMSG_DONE after it, which would leave
// netlink.Conn.Receive waiting for more; so the reply is read here, one
// datagram through the raw socket, with the socket's deadline still in
// force.
func (c *Conn) statsExchange() (netlink.Message, error) {
	sent, err := c.nl.Send(encodeStats())
	if err != nil {
		return netlink.Message{}, err
	}
	rc, err := c.nl.SyscallConn()
	if err != nil {
		return netlink.Message{}, err
	}
	buf := make([]byte, 4096)
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
			return netlink.Message{}, err
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(buf[:n]); err != nil {
			return netlink.Message{}, err
		}
		if m.Header.Sequence != sent.Header.Sequence {
			continue
		}
		if m.Header.Type == netlink.Error {
			return netlink.Message{}, errorMessage(m)
		}
		return m, nil
	}
}

// errorMessage returns the errno an NLMSG_ERROR message carries.
func errorMessage(m netlink.Message) error {
	if len(m.Data) < 4 {
		return errors.New("short netlink error message")
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return fmt.Errorf("unexpected acknowledgement")
	}
	return unix.Errno(-code)
}
