package conntrack

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
)

// Config is optional; a nil *Config means the calling process's network
// namespace.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
}

// Conn is a ctnetlink socket. Its methods may be called from several
// goroutines; they take turns on the socket.
type Conn struct {
	nl *nl.Conn
	// level is how much dump filtering the kernel accepted so far.
	level atomic.Int32
}

// Dial opens a ctnetlink socket in the namespace cfg names.
func Dial(cfg *Config) (*Conn, error) {
	var ns int
	if cfg != nil {
		ns = cfg.NetNS
	}
	c, err := nl.Dial(uapi.NETLINK_NETFILTER, ns)
	if err != nil {
		return nil, opError("dial", "", err)
	}
	return newConn(c), nil
}

func newConn(c *nl.Conn) *Conn {
	c.NameRequests("conntrack", func(r *nl.Request) string { return messageName(uint8(r.Type)) })
	conn := &Conn{nl: c}
	conn.level.Store(int32(levelTuple))
	return conn
}

// Close closes the socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// exchange runs one request and returns its replies, or the kernel's
// refusal.
func (c *Conn) exchange(ctx context.Context, r *nl.Request) ([]netlink.Message, error) {
	if err := c.nl.Exchange(ctx, r); err != nil {
		return nil, err
	}
	return r.Replies, r.Err
}

// messageName names a ctnetlink message type for a fault.Hook.
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
