package ipset

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// it is called before each message goes to the kernel with the
	// message's ipset command (e.g. "add"), and an error it returns
	// becomes that message's outcome as if the kernel had refused it,
	// without sending it: return a unix.Errno such as unix.ENOBUFS to
	// simulate the kernel's errno.
	Fault func(request string) error
}

// Conn is a netlink socket speaking the ipset protocol. Its methods are safe
// for concurrent use but run one at a time; open several Conns to work in
// parallel.
type Conn struct {
	mu sync.Mutex
	nl *netlink.Conn
	// protocol is the version negotiated at Dial: 7, or 6 on old kernels.
	protocol uint8
	// revisions caches the newest revision the kernel offers per type and
	// family; a kernel does not change its set types while running.
	revisions map[typeFamily]uint8
	// writeLimit caps the bytes of one bulk write, from the socket buffers.
	writeLimit int
	// recvBuf receives bulk replies, which may echo a whole request.
	recvBuf []byte
	// fault is Config.Fault.
	fault func(request string) error
}

type typeFamily struct {
	t Type
	f Family
}

// Socket buffer sizes asked for at Dial: bulk operations write many
// messages at a time, and the kernel echoes a failed request whole.
const (
	sendBufferSize = 4 << 20
	recvBufferSize = 4 << 20
	dialTimeout    = 10 * time.Second
)

// Dial opens a netlink socket for ipset in the namespace of cfg and agrees
// on a protocol version with the kernel.
func Dial(cfg *Config) (*Conn, error) {
	var nlcfg netlink.Config
	if cfg != nil {
		nlcfg.NetNS = cfg.NetNS
	}
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &nlcfg)
	if err != nil {
		return nil, opError("dial", "", "", err)
	}
	c, err := newConn(nl)
	if err != nil {
		nl.Close()
		return nil, err
	}
	if cfg != nil {
		c.fault = cfg.Fault
	}
	return c, nil
}

// newConn sets up a Conn on an open netlink socket.
func newConn(nl *netlink.Conn) (*Conn, error) {
	// The options are best effort: extended acks add the kernel's text to
	// errors, capped acks keep an error from echoing a large request.
	_ = nl.SetOption(netlink.ExtendedAcknowledge, true)
	_ = nl.SetOption(netlink.CapAcknowledge, true)
	_ = nl.SetWriteBuffer(sendBufferSize)
	_ = nl.SetReadBuffer(recvBufferSize)
	c := &Conn{
		nl:         nl,
		revisions:  map[typeFamily]uint8{},
		writeLimit: writeLimit(nl),
		recvBuf:    make([]byte, 2*maxMessage),
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	if err := c.negotiate(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// writeLimit sizes bulk writes to what the socket takes in one send, and
// to what its receive buffer holds if every message fails and is echoed.
func writeLimit(nl *netlink.Conn) int {
	snd, err1 := nl.WriteBuffer()
	rcv, err2 := nl.ReadBuffer()
	if err1 != nil || err2 != nil {
		return maxMessage
	}
	return max(min(snd-4096, rcv/2), maxMessage)
}

// Close closes the socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// Protocol returns the ipset protocol version in use.
func (c *Conn) Protocol() int {
	return int(c.protocol)
}

// negotiate asks for the newest protocol and settles on the kernel's if
// older. A kernel older than protocol 7 rejects a request for 7.
func (c *Conn) negotiate(ctx context.Context) error {
	for _, want := range []uint8{protocolNewest, protocolMin} {
		c.protocol = want
		replies, err := c.execute(ctx, encodeProtocol(want))
		if errors.Is(err, unix.Errno(errProtocol)) {
			continue
		}
		if err != nil {
			return opError("protocol", "", "", err)
		}
		got, _, err := decodeProtocol(replies)
		if err != nil {
			return opError("protocol", "", "", err)
		}
		if got < protocolMin {
			return opError("protocol", "", "", fmt.Errorf("kernel speaks ipset protocol %d, need %d or newer: %w", got, protocolMin, ErrProtocol))
		}
		c.protocol = min(got, protocolNewest)
		return nil
	}
	return opError("protocol", "", "", fmt.Errorf("kernel accepts neither protocol %d nor %d: %w", protocolNewest, protocolMin, ErrProtocol))
}

// withContext runs fn with ctx's deadline on the socket, and interrupts it
// when ctx is cancelled by moving the deadline to the past.
func (c *Conn) withContext(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A socket without deadlines (a test fake) works without cancellation.
	deadline, _ := ctx.Deadline()
	if err := c.nl.SetDeadline(deadline); err != nil {
		return fn()
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.nl.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	err := fn()
	if !stop() {
		<-fired
		if err != nil {
			err = ctx.Err()
		}
	}
	_ = c.nl.SetDeadline(time.Time{})
	return err
}

// execute sends one request and returns its replies, skipping replies to
// earlier requests that a cancelled call left unread.
func (c *Conn) execute(ctx context.Context, m netlink.Message) ([]netlink.Message, error) {
	var replies []netlink.Message
	err := c.withContext(ctx, func() error {
		if err := c.injectFault(m); err != nil {
			return &netlink.OpError{Op: "receive", Err: err}
		}
		req, err := c.nl.Send(m)
		if err != nil {
			return err
		}
		for {
			msgs, err := c.nl.Receive()
			var nerr *netlink.OpError
			if errors.As(err, &nerr) && nerr.Sequence != 0 && nerr.Sequence != req.Header.Sequence {
				continue
			}
			if err != nil {
				return err
			}
			if len(msgs) > 0 && msgs[0].Header.Sequence != req.Header.Sequence {
				continue
			}
			replies = msgs
			return nil
		}
	})
	return replies, err
}

// injectFault asks the fault hook, if any, about a message.
func (c *Conn) injectFault(m netlink.Message) error {
	if c.fault == nil {
		return nil
	}
	return c.fault(commandName(uint8(m.Header.Type)))
}

// commandName names an ipset command for the fault hook.
func commandName(cmd uint8) string {
	switch cmd {
	case cmdProtocol:
		return "protocol"
	case cmdCreate:
		return "create"
	case cmdDestroy:
		return "destroy"
	case cmdFlush:
		return "flush"
	case cmdRename:
		return "rename"
	case cmdSwap:
		return "swap"
	case cmdList:
		return "list"
	case cmdAdd:
		return "add"
	case cmdDel:
		return "delete"
	case cmdTest:
		return "test"
	case cmdHeader:
		return "header"
	case cmdType:
		return "type"
	case cmdGetByName:
		return "get by name"
	}
	return fmt.Sprintf("command %d", cmd)
}
