package nl

import (
	"errors"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dial opens a netlink socket of the given protocol (unix.NETLINK_*) in
// the network namespace netns names (0: the caller's).
func Dial(protocol, netns int) (*Conn, error) {
	nc, err := netlink.Dial(protocol, &netlink.Config{NetNS: netns})
	if err != nil {
		return nil, err
	}
	c, err := configure(nc, protocol)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func configure(nc *netlink.Conn, protocol int) (*Conn, error) {
	// Extended acks carry the kernel's reason; capped acks keep each
	// error reply small, whatever the request's size. Both exist since
	// Linux 4.12; without them errors only lose their text.
	_ = nc.SetOption(netlink.ExtendedAcknowledge, true)
	_ = nc.SetOption(netlink.CapAcknowledge, true)
	_ = nc.SetReadBuffer(wantReadBuffer)
	_ = nc.SetWriteBuffer(wantWriteBuffer)
	rb, err := nc.ReadBuffer()
	if err != nil {
		return nil, err
	}
	wb, err := nc.WriteBuffer()
	if err != nil {
		return nil, err
	}
	s, err := newSocket(nc)
	if err != nil {
		return nil, err
	}
	c := NewConn(s, rb, wb)
	c.peer = func() (*Conn, error) {
		ns, err := s.netNS()
		if err != nil {
			return nil, err
		}
		defer unix.Close(ns)
		return Dial(protocol, ns)
	}
	return c, nil
}

// SetStrictCheck asks the kernel to check this socket's dump requests
// strictly and to filter them by their header's fields
// (NETLINK_GET_STRICT_CHK, Linux 4.20): an address dump naming a link's
// index then carries that link's addresses only.
func (c *Conn) SetStrictCheck() error {
	s, ok := c.t.(*socket)
	if !ok {
		return errors.New("netlink: strict checking needs a socket")
	}
	return s.SetOption(netlink.GetStrictCheck, true)
}

// recvBufSize holds any datagram: dump replies are capped at 32 KiB, and
// an ipset bulk error echoes a request of up to 65 KiB.
const recvBufSize = 160 << 10

// socket is a netlink socket that mdlayher/netlink opened and configures;
// messages go through its file descriptor directly.
type socket struct {
	*netlink.Conn
	raw syscall.RawConn
	buf []byte
}

func newSocket(nc *netlink.Conn) (*socket, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &socket{Conn: nc, raw: raw, buf: make([]byte, recvBufSize)}, nil
}

func (s *socket) Send(b []byte) error {
	var werr error
	// RawConn.Write waits in the runtime poller, so deadlines apply.
	err := s.raw.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), b)
		return werr != unix.EAGAIN && werr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return werr
}

func (s *socket) Receive() ([]netlink.Message, error) {
	var (
		n, flags int
		rerr     error
	)
	// RawConn.Read waits in the runtime poller, so deadlines apply.
	err := s.raw.Read(func(fd uintptr) bool {
		n, _, flags, _, rerr = unix.Recvmsg(int(fd), s.buf, nil, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if flags&unix.MSG_TRUNC != 0 {
		return nil, errors.New("netlink datagram truncated")
	}
	return ParseMessages(s.buf[:n])
}

// netNS returns a new descriptor of the socket's network namespace, which
// SIOCGSKNS names (Linux 4.9) whatever namespace the caller is in now.
func (s *socket) netNS() (int, error) {
	var (
		ns   int
		nerr error
	)
	err := s.raw.Control(func(fd uintptr) {
		ns, nerr = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
	})
	if err == nil {
		err = nerr
	}
	return ns, err
}

// SetBuffers sets the socket's receive and send buffer sizes and sizes
// batches to what the kernel grants.
func (c *Conn) SetBuffers(read, write int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.t.(*socket)
	if !ok {
		return errors.ErrUnsupported
	}
	if err := s.SetReadBuffer(read); err != nil {
		return err
	}
	if err := s.SetWriteBuffer(write); err != nil {
		return err
	}
	rb, err := s.ReadBuffer()
	if err != nil {
		return err
	}
	wb, err := s.WriteBuffer()
	if err != nil {
		return err
	}
	n := NewConn(s, rb, wb)
	c.recvBudget, c.sendBudget = n.recvBudget, n.sendBudget
	return nil
}
