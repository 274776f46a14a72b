package ipvs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Config is optional; a nil *Config means the calling process's network
// namespace.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
	// Fault is a test hook for fault injection; leave it nil. When set,
	// it is called before each request goes to the kernel with the
	// request's generic netlink command (e.g. "new service"), and an
	// error it returns becomes that request's outcome as if the kernel had
	// refused it, without sending it: return a unix.Errno such as
	// unix.ENOBUFS to simulate the kernel's errno.
	Fault func(request string) error
}

// Socket buffer sizes asked for. With CAP_NET_ADMIN the kernel grants them
// beyond net.core.[rw]mem_max (and doubles them); without, it caps them,
// and batches are cut into smaller writes to match.
const (
	wantReadBuffer  = 8 << 20
	wantWriteBuffer = 4 << 20
	maxWrite        = 1 << 20
)

// Conn is a connection to the kernel's IPVS over generic netlink. Its
// methods are safe for concurrent use; they are serialized, each holding
// the socket until its replies are in.
type Conn struct {
	mu     sync.Mutex
	t      transport
	family uint16
	// dirty is set when a call ended before reading all its replies, so the
	// next one first discards them.
	dirty bool
	// sendBudget and recvBudget bound the bytes of one write and the
	// receive-buffer space its replies may take, so that no reply is
	// dropped with ENOBUFS.
	sendBudget, recvBudget int
	// seq is the last sequence number used; wbuf is reused for writes.
	seq  uint32
	wbuf []byte
	// dialPeer opens another Conn in the same namespace, for Table; nil
	// when the transport cannot.
	dialPeer func() (*Conn, error)
	// fault is Config.Fault.
	fault func(request string) error
}

// Dial opens a connection to IPVS in the given network namespace. It fails
// with ErrNotAvailable when the kernel has no IPVS; it never loads modules.
func Dial(cfg *Config) (*Conn, error) {
	var ns int
	var fault func(string) error
	if cfg != nil {
		ns, fault = cfg.NetNS, cfg.Fault
	}
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns})
	if err != nil {
		return nil, fmt.Errorf("ipvs: dial generic netlink: %w", err)
	}
	c, err := newConn(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.setFault(fault)
	return c, nil
}

func newConn(nc *netlink.Conn) (*Conn, error) {
	family, err := lookupFamily(genetlink.NewConn(nc))
	if err != nil {
		return nil, err
	}
	return configure(nc, family)
}

// configure sets up a socket whose family id is known.
func configure(nc *netlink.Conn, family uint16) (*Conn, error) {
	// Extended acks carry the kernel's reason; capped acks keep each
	// error reply small, whatever the request's size. Both exist since
	// Linux 4.12; without them errors only lose their text.
	_ = nc.SetOption(netlink.ExtendedAcknowledge, true)
	_ = nc.SetOption(netlink.CapAcknowledge, true)
	_ = nc.SetReadBuffer(wantReadBuffer)
	_ = nc.SetWriteBuffer(wantWriteBuffer)
	rb, err := nc.ReadBuffer()
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	wb, err := nc.WriteBuffer()
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	s, err := newSocket(nc)
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	c := newConnWith(s, family, rb, wb)
	c.dialPeer = func() (*Conn, error) { return s.dialPeer(family) }
	return c, nil
}

// setFault installs the fault hook, on the peers Table opens too.
func (c *Conn) setFault(fault func(string) error) {
	if fault == nil {
		return
	}
	c.fault = fault
	if dial := c.dialPeer; dial != nil {
		c.dialPeer = func() (*Conn, error) {
			p, err := dial()
			if err == nil {
				p.setFault(fault)
			}
			return p, err
		}
	}
}

// newConnWith makes a Conn over a transport, with the sizes of its receive
// and send buffers as the kernel reports them.
func newConnWith(t transport, family uint16, readBuf, writeBuf int) *Conn {
	// Half the receive buffer: the kernel continues a dump only while the
	// buffer is at most half full.
	return &Conn{
		t:          t,
		family:     family,
		seq:        uint32(time.Now().UnixNano()),
		recvBudget: readBuf / 2,
		// netlink_sendmsg refuses a write longer than the send buffer
		// less 32 bytes.
		sendBudget: min(writeBuf-64, maxWrite),
	}
}

// lookupFamily finds the IPVS generic netlink family's id.
func lookupFamily(gc *genetlink.Conn) (uint16, error) {
	f, err := gc.GetFamily(genlName)
	if err != nil {
		oe := &OpError{Op: "look up generic netlink family", Object: genlName, Err: err}
		if errors.Is(err, unix.ENOENT) {
			oe.kind = ErrNotAvailable
		}
		return 0, oe
	}
	return f.ID, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Close()
}

// run exchanges requests with the kernel under ctx: its deadline becomes
// the socket's and its cancellation expires the socket's deadline, which
// wakes a blocked read or write.
func (c *Conn) run(ctx context.Context, reqs []*request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		failAll(reqs, err)
		return err
	}
	if c.dirty {
		c.drain()
	}
	deadline, _ := ctx.Deadline()
	if err := c.t.SetDeadline(deadline); err != nil {
		failAll(reqs, err)
		return err
	}
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.t.SetDeadline(time.Unix(1, 0))
		close(expired)
	})
	err := c.exchange(reqs)
	if !stop() {
		<-expired
	}
	if err != nil {
		c.dirty = true
		if cerr := contextCause(ctx, err); cerr != err {
			for _, r := range reqs {
				if r.err == err {
					r.err = cerr
				}
			}
			err = cerr
		}
	}
	return err
}

// contextCause returns the context's error for a socket timeout that the
// context caused: its cancellation, or its deadline, which the socket may
// notice a moment before the context does.
func contextCause(ctx context.Context, err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// drain discards replies left by an interrupted call. Every reply to a
// request is queued by the time its write returns, so a short wait is
// enough; stale replies that still arrive later are ignored by sequence
// number.
func (c *Conn) drain() {
	_ = c.t.SetDeadline(time.Now().Add(20 * time.Millisecond))
	for {
		_, err := c.t.receive()
		if err != nil && !errors.Is(err, unix.ENOBUFS) {
			break
		}
	}
	c.dirty = false
}

func failAll(reqs []*request, err error) {
	for _, r := range reqs {
		if !r.done {
			r.err, r.done = err, true
		}
	}
}
