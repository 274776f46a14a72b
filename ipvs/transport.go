package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// transport moves netlink messages between the Conn and the kernel. The
// socket below is the real one; unit tests put a fake kernel here.
type transport interface {
	// send writes netlink messages, framed by the caller, in one
	// sendmsg.
	send(b []byte) error
	// receive reads one datagram and returns its messages as they are,
	// errors and multi-part ends included, so that replies to many
	// requests can be told apart by sequence number.
	receive() ([]netlink.Message, error)
	SetDeadline(t time.Time) error
	Close() error
}

// recvBufSize holds any datagram: the kernel caps dump replies at 32 KiB.
const recvBufSize = 64 << 10

// socket is a netlink socket that mdlayher/netlink opened and configures.
// Messages go through its file descriptor directly: a batch is framed
// into one buffer by the Conn, and replies are read as raw datagrams,
// because netlink.Conn.Receive stops at the first error in a datagram and
// folds multi-part replies together, which loses the per-request results
// an exchange of many requests needs.
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

func (s *socket) send(b []byte) error {
	var werr error
	// RawConn.Write waits in the runtime poller, so socket deadlines apply.
	err := s.raw.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), b)
		return werr != unix.EAGAIN && werr != unix.EINTR
	})
	if err != nil {
		return err
	}
	return werr
}

func (s *socket) receive() ([]netlink.Message, error) {
	var (
		n, flags int
		rerr     error
	)
	// RawConn.Read waits in the runtime poller, so socket deadlines apply.
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
	return parseMessages(s.buf[:n])
}

// parseMessages splits a datagram into messages. Their payloads share
// one copy of the datagram.
func parseMessages(b []byte) ([]netlink.Message, error) {
	const hdrLen = 16
	b = append([]byte(nil), b...)
	var msgs []netlink.Message
	for len(b) >= hdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < hdrLen || l > len(b) {
			return msgs, fmt.Errorf("netlink message of length %d in %d bytes", l, len(b))
		}
		m := netlink.Message{
			Header: netlink.Header{
				Length:   uint32(l),
				Type:     netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6])),
				Flags:    netlink.HeaderFlags(binary.NativeEndian.Uint16(b[6:8])),
				Sequence: binary.NativeEndian.Uint32(b[8:12]),
				PID:      binary.NativeEndian.Uint32(b[12:16]),
			},
			Data: b[hdrLen:l:l],
		}
		msgs = append(msgs, m)
		l = (l + 3) &^ 3
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return msgs, nil
}

// dialPeer opens another socket in this socket's network namespace, which
// SIOCGSKNS names (Linux 4.9), whatever namespace the caller is in now.
func (s *socket) dialPeer(family uint16) (*Conn, error) {
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
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns})
	if err != nil {
		return nil, err
	}
	c, err := configure(nc, family)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}
