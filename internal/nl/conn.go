package nl

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/fault"
)

// Socket buffer sizes asked for. With CAP_NET_ADMIN the kernel grants them
// beyond net.core.[rw]mem_max (and doubles them); without, it caps them,
// and batches are cut into smaller writes to match.
const (
	wantReadBuffer  = 8 << 20
	wantWriteBuffer = 4 << 20
	maxWrite        = 1 << 20
)

// Conn is a netlink socket of one protocol in one network namespace. Its
// exchanges are serialized, each holding the socket until its replies are
// in.
type Conn struct {
	mu sync.Mutex
	t  Transport
	// dirty is set when an exchange ended before reading all its replies,
	// so the next one first discards them.
	dirty bool
	// sendBudget and recvBudget bound the bytes of one write and the
	// receive-buffer space its replies may take, so that no reply is
	// dropped with ENOBUFS.
	sendBudget, recvBudget int
	// seq is the last sequence number used; wbuf is reused for writes.
	seq  uint32
	wbuf []byte
	// peer opens another socket in the same namespace; nil when the
	// transport cannot.
	peer func() (*Conn, error)
	// pkg and name label requests for a fault.Hook the context carries.
	pkg  string
	name func(r *Request) string
}

// NewConn makes a Conn over a transport, with the sizes of its receive
// and send buffers as the kernel reports them.
func NewConn(t Transport, readBuf, writeBuf int) *Conn {
	return &Conn{
		t:   t,
		seq: uint32(time.Now().UnixNano()),
		// Half the receive buffer: the kernel continues a dump only
		// while the buffer is at most half full.
		recvBudget: readBuf / 2,
		// netlink_sendmsg refuses a write longer than the send buffer
		// less 32 bytes.
		sendBudget: min(writeBuf-64, maxWrite),
	}
}

// NameRequests says how requests are named to a fault.Hook that an
// exchange's context carries: the package's name, and a function naming
// each request ("" for one the hook is not asked about). The peers
// DialPeer opens inherit it.
func (c *Conn) NameRequests(pkg string, name func(r *Request) string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pkg, c.name = pkg, name
}

// DialPeer opens another socket of the same protocol in the same network
// namespace, whatever namespace the caller is in now. It fails when the
// transport cannot (a fake, or a kernel without SIOCGSKNS).
func (c *Conn) DialPeer() (*Conn, error) {
	if c.peer == nil {
		return nil, errors.ErrUnsupported
	}
	p, err := c.peer()
	if err != nil {
		return nil, err
	}
	p.pkg, p.name = c.pkg, c.name
	return p, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Close()
}

// Exchange sends the requests and collects each one's outcome into it. It
// follows ctx: the context's deadline becomes the socket's and its
// cancellation expires the socket's deadline, which wakes a blocked read
// or write. It returns an error only when the exchange itself broke off
// (the context ended, the socket failed); requests whose outcome is then
// unknown carry that error too.
func (c *Conn) Exchange(ctx context.Context, reqs ...*Request) error {
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
		// Without a deadline the context could not interrupt the
		// exchange: refuse it rather than lose cancellation.
		failAll(reqs, err)
		return err
	}
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.t.SetDeadline(time.Unix(1, 0))
		close(expired)
	})
	var hook fault.Hook
	if c.name != nil {
		hook = fault.From(ctx)
	}
	err := c.exchange(reqs, hook)
	if !stop() {
		<-expired
	}
	if err != nil {
		c.dirty = true
		if cerr := contextCause(ctx, err); cerr != err {
			for _, r := range reqs {
				if r.Err == err {
					r.Err = cerr
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

// drainWait bounds the wait for replies an interrupted exchange left:
// every reply to a request is queued by the time its write returns, so a
// short wait is enough; stale replies that still arrive later are ignored
// by sequence number.
const drainWait = 20 * time.Millisecond

// drain discards replies left by an interrupted exchange.
func (c *Conn) drain() {
	_ = c.t.SetDeadline(time.Now().Add(drainWait))
	for {
		_, err := c.t.Receive()
		if err != nil && !errors.Is(err, syscall.ENOBUFS) {
			break
		}
	}
	c.dirty = false
}

func failAll(reqs []*Request, err error) {
	for _, r := range reqs {
		if !r.done {
			r.Err, r.done = err, true
		}
	}
}
