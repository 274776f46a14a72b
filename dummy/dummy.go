package dummy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	nl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config is optional; a nil *Config means the calling process's network
// namespace.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
	// Fault is a test hook for fault injection; leave it nil. When set,
	// it is called before each operation goes to the kernel, and before
	// each address request of a batch, with the operation's name ("ensure",
	// "get", "delete", "list", "bind", "unbind"), and an error it returns
	// becomes that operation's outcome as if the kernel had refused it,
	// without sending it: return a unix.Errno such as unix.ENOBUFS to
	// simulate the kernel's errno.
	Fault func(request string) error
}

// Conn is an rtnetlink connection in one network namespace.
type Conn struct {
	mu    sync.Mutex
	h     *netlink.Handle
	netns int
	// raw carries the batched address requests; opened on first use.
	raw *nl.Conn
	// fault is Config.Fault.
	fault func(request string) error
}

// Dial opens an rtnetlink connection in the namespace cfg names.
func Dial(cfg *Config) (*Conn, error) {
	var (
		h   *netlink.Handle
		err error
	)
	if cfg != nil && cfg.NetNS != 0 {
		h, err = netlink.NewHandleAt(netns.NsHandle(cfg.NetNS), unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("dummy: opening rtnetlink: %w", err)
	}
	conn := &Conn{h: h}
	if cfg != nil {
		conn.netns, conn.fault = cfg.NetNS, cfg.Fault
	}
	return conn, nil
}

// Close closes the connection's sockets.
func (c *Conn) Close() error {
	c.h.Close()
	if c.raw != nil {
		return c.raw.Close()
	}
	return nil
}

// replyTimeout bounds the wait for the kernel's answer when the context has
// no deadline; rtnetlink answers at once, so reaching it means trouble.
const replyTimeout = time.Minute

// do runs fn, the operation called op, with the connection's socket to
// itself, after checking the context and asking the fault hook, and with
// the context's deadline as the socket's timeout.
func (c *Conn) do(ctx context.Context, op string, fn func(h *netlink.Handle) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fault != nil {
		if err := c.fault(op); err != nil {
			return err
		}
	}
	timeout := replyTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if timeout = time.Until(deadline); timeout <= 0 {
			return context.DeadlineExceeded
		}
	}
	if err := c.h.SetSocketTimeout(timeout); err != nil {
		return err
	}
	return fn(c.h)
}

// Device is a dummy link, found or created by [Conn.Ensure] or [Conn.Get].
type Device struct {
	conn  *Conn
	name  string
	index int
}

// Name returns the link's name.
func (d *Device) Name() string { return d.name }

// Ensure returns the dummy link called name, creating it (down) if it does
// not exist. A link of that name that is not a dummy device is left alone
// and reported with [ErrWrongKind].
func (c *Conn) Ensure(ctx context.Context, name string) (*Device, error) {
	var dev *Device
	err := c.do(ctx, "ensure", func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if errors.Is(err, ErrLinkNotFound) {
			err = h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return classify(err)
			}
			// Another program may have created it meanwhile; look again
			// so its kind is checked either way.
			link, err = lookup(h, name)
		}
		if err != nil {
			return err
		}
		dev = &Device{conn: c, name: name, index: link.Attrs().Index}
		return nil
	})
	if err != nil {
		return nil, opError("ensure", name, netip.Addr{}, err)
	}
	return dev, nil
}

// Get returns the existing dummy link called name, or an error matching
// [ErrLinkNotFound] or [ErrWrongKind].
func (c *Conn) Get(ctx context.Context, name string) (*Device, error) {
	var dev *Device
	err := c.do(ctx, "get", func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil {
			return err
		}
		dev = &Device{conn: c, name: name, index: link.Attrs().Index}
		return nil
	})
	if err != nil {
		return nil, opError("get", name, netip.Addr{}, err)
	}
	return dev, nil
}

// Delete removes the dummy link called name with all its addresses. A
// missing link is not an error; a link that is not a dummy device is not
// deleted.
func (c *Conn) Delete(ctx context.Context, name string) error {
	err := c.do(ctx, "delete", func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if errors.Is(err, ErrLinkNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return classify(err)
		}
		return nil
	})
	if err != nil {
		return opError("delete", name, netip.Addr{}, err)
	}
	return nil
}

// lookup finds a link by name and checks that it is a dummy device.
func lookup(h *netlink.Handle, name string) (netlink.Link, error) {
	link, err := h.LinkByName(name)
	if err != nil {
		return nil, classify(err)
	}
	if kind := link.Type(); kind != "dummy" {
		return nil, kindError{kind: ErrWrongKind, err: fmt.Errorf("it is of kind %q", kind)}
	}
	return link, nil
}

// classify attaches the package's sentinels to the errors the netlink
// library returns, keeping the errno.
func classify(err error) error {
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound), errors.Is(err, unix.ENODEV):
		return kindError{kind: ErrLinkNotFound, err: unix.ENODEV}
	case errors.Is(err, unix.EOPNOTSUPP):
		return kindError{kind: ErrNotSupported, err: err}
	}
	return err
}

// kindError carries a sentinel and the error behind it until opError turns
// them into an *Error.
type kindError struct {
	kind error
	err  error
}

func (e kindError) Error() string   { return e.kind.Error() }
func (e kindError) Unwrap() []error { return []error{e.kind, e.err} }

func opError(op, link string, addr netip.Addr, err error) *Error {
	e := &Error{Op: op, Link: link, Addr: addr, Err: err}
	var ke kindError
	if errors.As(err, &ke) {
		e.Kind, e.Err = ke.kind, ke.err
	}
	return e
}

// Bind binds addr to the device: as /32 for IPv4, as /128 without duplicate
// address detection for IPv6. Binding a bound address succeeds.
func (d *Device) Bind(ctx context.Context, addr netip.Addr) error {
	nlAddr, err := hostAddr(addr)
	if err == nil {
		err = d.conn.do(ctx, "bind", func(h *netlink.Handle) error {
			return classify(h.AddrReplace(d.link(), nlAddr))
		})
	}
	if err != nil {
		return opError("bind", d.name, addr, err)
	}
	return nil
}

// Unbind removes addr from the device. Unbinding an unbound address
// succeeds.
func (d *Device) Unbind(ctx context.Context, addr netip.Addr) error {
	nlAddr, err := hostAddr(addr)
	if err == nil {
		err = d.conn.do(ctx, "unbind", func(h *netlink.Handle) error {
			err := h.AddrDel(d.link(), nlAddr)
			if errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT) {
				return nil
			}
			return classify(err)
		})
	}
	if err != nil {
		return opError("unbind", d.name, addr, err)
	}
	return nil
}

// dumpAttempts bounds the retries of an address dump that the kernel
// reports as interrupted by a concurrent change.
const dumpAttempts = 5

// Addresses returns the addresses bound to the device, IPv4 first, each
// family in ascending order. It reads them with one dump of the namespace's
// addresses.
func (d *Device) Addresses(ctx context.Context) ([]netip.Addr, error) {
	var addrs []netip.Addr
	err := d.conn.do(ctx, "list", func(h *netlink.Handle) error {
		var (
			list []netlink.Addr
			err  error
		)
		for range dumpAttempts {
			list, err = h.AddrList(d.link(), netlink.FAMILY_ALL)
			if !errors.Is(err, netlink.ErrDumpInterrupted) {
				break
			}
		}
		if err != nil {
			return classify(err)
		}
		addrs = make([]netip.Addr, 0, len(list))
		for _, a := range list {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				addrs = append(addrs, ip.Unmap())
			}
		}
		return nil
	})
	if err != nil {
		return nil, opError("list", d.name, netip.Addr{}, err)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return addrs, nil
}

// link names the device by index, which the library uses as is.
func (d *Device) link() netlink.Link {
	return &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: d.name, Index: d.index}}
}

// hostAddr turns addr into a single-host address for the netlink library.
func hostAddr(addr netip.Addr) (*netlink.Addr, error) {
	if !addr.IsValid() {
		return nil, errors.New("invalid address")
	}
	addr = addr.Unmap()
	nl := &netlink.Addr{IPNet: &net.IPNet{
		IP:   addr.AsSlice(),
		Mask: net.CIDRMask(addr.BitLen(), addr.BitLen()),
	}}
	if addr.Is6() {
		nl.Flags = unix.IFA_F_NODAD
	}
	return nl, nil
}
