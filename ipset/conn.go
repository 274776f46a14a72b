package ipset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Config is optional; a nil *Config means the calling process's network
// namespace.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
}

// Conn is a netlink socket speaking the ipset protocol. Its methods are safe
// for concurrent use but run one at a time; open several Conns to work in
// parallel.
type Conn struct {
	mu sync.Mutex
	nl *nl.Conn
	// protocol is the version negotiated at Dial: 7, or 6 on old kernels.
	protocol uint8
	// revisions caches the newest revision the kernel offers per type and
	// family; a kernel does not change its set types while running.
	revisions map[typeFamily]uint8
}

type typeFamily struct {
	t Type
	f inet.Family
}

// dialTimeout bounds the protocol negotiation at Dial.
const dialTimeout = 10 * time.Second

// Dial opens a netlink socket for ipset in the namespace of cfg and agrees
// on a protocol version with the kernel.
func Dial(cfg *Config) (*Conn, error) {
	var ns int
	if cfg != nil {
		ns = cfg.NetNS
	}
	c, err := nl.Dial(uapi.NETLINK_NETFILTER, ns)
	if err != nil {
		return nil, opError("dial", "", "", err)
	}
	conn, err := newConn(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return conn, nil
}

// newConn sets up a Conn on an open netlink socket.
func newConn(c *nl.Conn) (*Conn, error) {
	c.NameRequests("ipset", func(r *nl.Request) string { return commandName(uint8(r.Type)) })
	conn := &Conn{nl: c, revisions: map[typeFamily]uint8{}}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	if err := conn.negotiate(ctx); err != nil {
		return nil, err
	}
	return conn, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// ProtocolVersion returns the version of the ipset netlink protocol in use
// (not to be confused with an entry's IP Protocol).
func (c *Conn) ProtocolVersion() int {
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
			return &OpError{Op: "protocol", Err: fmt.Errorf("kernel speaks ipset protocol %d, need %d or newer", got, protocolMin), sentinel: ErrProtocolMismatch}
		}
		c.protocol = min(got, protocolNewest)
		return nil
	}
	return &OpError{Op: "protocol", Err: fmt.Errorf("kernel accepts neither protocol %d nor %d", protocolNewest, protocolMin), sentinel: ErrProtocolMismatch}
}

// execute sends one request and returns its replies, or the kernel's
// refusal.
func (c *Conn) execute(ctx context.Context, r *nl.Request) ([]netlink.Message, error) {
	if err := c.nl.Exchange(ctx, r); err != nil {
		return nil, err
	}
	return r.Replies, r.Err
}

// commandName names an ipset command for a fault.Hook.
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
