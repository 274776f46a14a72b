package conntrack

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

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
	// request's ctnetlink message type (e.g. "delete"), and an error it
	// returns becomes that request's outcome as if the kernel had refused
	// it, without sending it: return a unix.Errno such as unix.ENOBUFS to
	// simulate the kernel's errno.
	Fault func(request string) error
}

// Conn is a ctnetlink socket. Its methods may be called from several
// goroutines; they take turns on the socket.
type Conn struct {
	mu sync.Mutex
	nl *netlink.Conn
	// level is how much dump filtering the kernel accepted so far.
	level atomic.Int32
	// sys is false only for the unit tests' fake socket, which has neither
	// deadlines nor a file descriptor.
	sys bool
	// fault is Config.Fault.
	fault func(request string) error
}

// recvBufferSize holds the largest datagram the kernel sends: dumps come in
// skbs of at most 32 KiB.
const recvBufferSize = 64 << 10

// Dial opens a ctnetlink socket in the namespace cfg names.
func Dial(cfg *Config) (*Conn, error) {
	var ns int
	if cfg != nil {
		ns = cfg.NetNS
	}
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{
		NetNS:             ns,
		MessageBufferSize: recvBufferSize,
	})
	if err != nil {
		return nil, opError("dial", "", err)
	}
	// Extended acks carry the kernel's explanation of a refusal; capped acks
	// keep the kernel from echoing every failed request back, so a batch of
	// failures fits in the receive buffer. Both are best effort.
	_ = nl.SetOption(netlink.ExtendedAcknowledge, true)
	_ = nl.SetOption(netlink.CapAcknowledge, true)
	c := newConn(nl, true)
	if cfg != nil {
		c.fault = cfg.Fault
	}
	return c, nil
}

func newConn(nl *netlink.Conn, sys bool) *Conn {
	c := &Conn{nl: nl, sys: sys}
	c.level.Store(int32(levelTuple))
	return c
}

// Close closes the socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// begin takes the socket for one operation and makes ctx's deadline and
// cancellation reach it; the returned function releases both.
func (c *Conn) begin(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.sys {
		return c.mu.Unlock, nil
	}
	deadline, _ := ctx.Deadline()
	if err := c.nl.SetDeadline(deadline); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	// An operation cut short by its context may have left replies behind;
	// they must not be taken for the next operation's.
	if err := c.drain(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		// A deadline in the past wakes a blocked read or write at once.
		_ = c.nl.SetDeadline(time.Unix(1, 0))
		close(expired)
	})
	return func() {
		if !stop() {
			// Let the expiry finish before the next operation sets its own
			// deadline.
			<-expired
		}
		c.mu.Unlock()
	}, nil
}

// ctxErr replaces a timeout caused by ctx with ctx's error. The socket's
// deadline can fire a moment before ctx's own timer marks it done.
func ctxErr(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return err
}
