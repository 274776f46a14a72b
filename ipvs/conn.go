package ipvs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// Conn is a connection to the kernel's IPVS over generic netlink. Its
// methods are safe for concurrent use; they are serialized, each holding
// the socket until its replies are in.
type Conn struct {
	nl     *nl.Conn
	family uint16
	// windows keeps the bookkeeping of a window of requests (see apply)
	// between calls: a large change comes as many batches in a row.
	windows sync.Pool
}

// familyTimeout bounds the family lookup at Dial.
const familyTimeout = 10 * time.Second

// Dial opens a connection to IPVS in the given network namespace. It fails
// with ErrNotSupported when the kernel has no IPVS; it never loads modules.
func Dial(cfg *Config) (*Conn, error) {
	var ns int
	if cfg != nil {
		ns = cfg.NetNS
	}
	c, err := nl.Dial(uapi.NETLINK_GENERIC, ns)
	if err != nil {
		return nil, &OpError{Op: "dial", Object: "generic netlink", Err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), familyTimeout)
	defer cancel()
	family, err := lookupFamily(ctx, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return newConn(c, family), nil
}

func newConn(c *nl.Conn, family uint16) *Conn {
	c.NameRequests("ipvs", func(r *nl.Request) string { return commandName(r.Data[0]) })
	return &Conn{nl: c, family: family}
}

// lookupFamily finds the IPVS generic netlink family's id.
func lookupFamily(ctx context.Context, c *nl.Conn) (uint16, error) {
	id, err := c.GenlFamily(ctx, genlName)
	if err != nil {
		oe := &OpError{Op: "look up generic netlink family", Object: genlName, Err: err}
		if errors.Is(err, unix.ENOENT) {
			oe.sentinel = ErrNotSupported
		}
		return 0, oe
	}
	return id, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// Requests are changes (answered only when they fail), gets (a reply and
// an acknowledgement) or dumps.
const (
	reqChange netlink.HeaderFlags = 0
	reqGet                        = netlink.Acknowledge
	reqDump                       = netlink.Dump
)

// commandName names a command for a fault.Hook.
func commandName(cmd uint8) string {
	switch cmd {
	case cmdNewService:
		return "new service"
	case cmdSetService:
		return "set service"
	case cmdDelService:
		return "delete service"
	case cmdGetService:
		return "get service"
	case cmdNewDest:
		return "new destination"
	case cmdSetDest:
		return "set destination"
	case cmdDelDest:
		return "delete destination"
	case cmdGetDest:
		return "get destination"
	case cmdSetConfig:
		return "set config"
	case cmdGetConfig:
		return "get config"
	case cmdGetInfo:
		return "get info"
	case cmdZero:
		return "zero"
	case cmdFlush:
		return "flush"
	}
	return fmt.Sprintf("command %d", cmd)
}
