package dummy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"net/netip"
	"slices"

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
	// Binding is how the connection's devices bind service addresses;
	// the zero value, BindAddresses, is kube-proxy's way.
	Binding Binding
}

// Conn is an rtnetlink connection in one network namespace.
type Conn struct {
	nl      *nl.Conn
	binding Binding
}

// Dial opens an rtnetlink connection in the namespace cfg names.
func Dial(cfg *Config) (*Conn, error) {
	var cf Config
	if cfg != nil {
		cf = *cfg
	}
	if cf.Binding > BindLocalRoutes {
		return nil, &OpError{Op: "dial", Object: "rtnetlink", Err: fmt.Errorf("unknown binding %v", cf.Binding)}
	}
	c, err := nl.Dial(uapi.NETLINK_ROUTE, cf.NetNS)
	if err != nil {
		return nil, &OpError{Op: "dial", Object: "rtnetlink", Err: err}
	}
	conn := newConn(c)
	conn.binding = cf.Binding
	return conn, nil
}

func newConn(c *nl.Conn) *Conn {
	// A fault.Hook is asked about each address request; the link
	// operations, which take several requests, are asked about once, by
	// check.
	c.NameRequests("dummy", func(r *nl.Request) string {
		switch r.Type {
		case uapi.RTM_NEWADDR, uapi.RTM_NEWROUTE:
			return "bind"
		case uapi.RTM_DELADDR, uapi.RTM_DELROUTE:
			return "unbind"
		}
		return ""
	})
	return &Conn{nl: c}
}

// Close closes the connection's socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// check asks the fault.Hook ctx carries, if any, about an operation.
func check(ctx context.Context, op string) error {
	return fault.Check(ctx, "dummy", op)
}

// Device is a dummy link, found or created by [Conn.Ensure] or [Conn.Get].
// It is known by name: every operation looks the link up again, so a
// device that someone deleted and created anew is still the Device, and a
// link of its name that is not a dummy device is never touched.
type Device struct {
	conn    *Conn
	name    string
	binding Binding
}

// Name returns the link's name.
func (d *Device) Name() string { return d.name }

// Ensure returns the dummy link called name, creating it (down) if it does
// not exist. A link of that name that is not a dummy device is left alone
// and reported with [ErrLinkNotDummy].
func (c *Conn) Ensure(ctx context.Context, name string) (*Device, error) {
	err := check(ctx, "ensure")
	if err == nil {
		_, err = c.lookup(ctx, name)
	}
	if errors.Is(err, ErrLinkNotExist) {
		err = c.change(ctx, uapi.RTM_NEWLINK, netlink.Create|netlink.Excl, newLinkMessage(name))
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, opError("ensure", name, netip.Addr{}, classify(err))
		}
		// Another program may have created it meanwhile; look again so
		// its kind is checked either way.
		_, err = c.lookup(ctx, name)
	}
	if err != nil {
		return nil, opError("ensure", name, netip.Addr{}, err)
	}
	return &Device{conn: c, name: name, binding: c.binding}, nil
}

// Get returns the existing dummy link called name, or an error matching
// [ErrLinkNotExist] or [ErrLinkNotDummy].
func (c *Conn) Get(ctx context.Context, name string) (*Device, error) {
	err := check(ctx, "get")
	if err == nil {
		_, err = c.lookup(ctx, name)
	}
	if err != nil {
		return nil, opError("get", name, netip.Addr{}, err)
	}
	return &Device{conn: c, name: name, binding: c.binding}, nil
}

// Delete removes the dummy link called name with all its addresses. A
// missing link is not an error; a link that is not a dummy device is not
// deleted.
func (c *Conn) Delete(ctx context.Context, name string) error {
	err := check(ctx, "delete")
	var index int32
	if err == nil {
		index, err = c.lookup(ctx, name)
	}
	if errors.Is(err, ErrLinkNotExist) {
		return nil
	}
	if err == nil {
		err = c.change(ctx, uapi.RTM_DELLINK, 0, linkMessage(index, ""))
		if errors.Is(err, unix.ENODEV) {
			err = nil
		}
		err = classify(err)
	}
	if err != nil {
		return opError("delete", name, netip.Addr{}, err)
	}
	return nil
}

// change sends one request that asks for an acknowledgement.
func (c *Conn) change(ctx context.Context, typ uint16, flags netlink.HeaderFlags, data []byte) error {
	r := &nl.Request{Type: typ, Flags: flags | netlink.Acknowledge, Data: data}
	if err := c.nl.Exchange(ctx, r); err != nil {
		return err
	}
	return r.Err
}

// lookup finds a link by name, checks that it is a dummy device and
// returns its index.
func (c *Conn) lookup(ctx context.Context, name string) (int32, error) {
	r := &nl.Request{Type: uapi.RTM_GETLINK, Flags: netlink.Acknowledge, Data: linkMessage(0, name)}
	if err := c.nl.Exchange(ctx, r); err != nil {
		return 0, err
	}
	if r.Err != nil {
		return 0, classify(r.Err)
	}
	if len(r.Replies) == 0 {
		return 0, errors.New("no link in the kernel's reply")
	}
	index, _, kind, err := nl.DecodeIfInfo(r.Replies[0].Data)
	if err != nil {
		return 0, err
	}
	if kind != "dummy" {
		return 0, sentinelError{sentinel: ErrLinkNotDummy, err: fmt.Errorf("it is of kind %q", kind)}
	}
	return index, nil
}

// classify attaches the package's sentinels to the kernel's errors,
// keeping the errno.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.ENODEV):
		return sentinelError{sentinel: ErrLinkNotExist, err: unix.ENODEV}
	case errors.Is(err, unix.EOPNOTSUPP):
		return sentinelError{sentinel: ErrNotSupported, err: err}
	}
	return err
}

// Bind binds addr to the device per the connection's Binding: as an
// address, /32 for IPv4, /128 without duplicate address detection for
// IPv6; or, with BindLocalRoutes, an IPv4 address as a local route. Binding
// a bound address succeeds.
func (d *Device) Bind(ctx context.Context, addr netip.Addr) error {
	return d.addrBatch(ctx, "bind", []netip.Addr{addr}, false)
}

// Unbind removes addr from the device, bound as Bind binds it. Unbinding
// an unbound address succeeds.
func (d *Device) Unbind(ctx context.Context, addr netip.Addr) error {
	return d.addrBatch(ctx, "unbind", []netip.Addr{addr}, false)
}

// dumpAttempts bounds the retries of a dump that the kernel reports as
// interrupted by a concurrent change.
const dumpAttempts = 5

// Addresses returns the service addresses bound to the device as its
// Binding binds them, IPv4 first, each family in ascending order. In
// BindAddresses mode they are the device's addresses, read with one dump of
// the namespace's addresses; in BindLocalRoutes mode the IPv4 ones are the
// package's local routes through the device, read with a dump of the
// namespace's IPv4 routes, and the device's IPv4 addresses are not listed
// (see [Device.Leftovers]).
func (d *Device) Addresses(ctx context.Context) ([]netip.Addr, error) {
	return d.list(ctx, d.bound)
}

// list looks the device up and returns what fn lists on it, sorted.
func (d *Device) list(ctx context.Context, fn func(context.Context, int32) ([]netip.Addr, error)) ([]netip.Addr, error) {
	err := check(ctx, "list")
	var index int32
	if err == nil {
		index, err = d.conn.lookup(ctx, d.name)
	}
	var addrs []netip.Addr
	if err == nil {
		addrs, err = fn(ctx, index)
	}
	if err != nil {
		return nil, opError("list", d.name, netip.Addr{}, err)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return addrs, nil
}

// addresses dumps the namespace's addresses and returns those on link
// index.
func (d *Device) addresses(ctx context.Context, index int32) ([]netip.Addr, error) {
	return d.dump(ctx, "address", uapi.RTM_GETADDR, uapi.RTM_NEWADDR, make([]byte, nl.IfAddrMsgLen), func(b []byte) (netip.Addr, bool, error) {
		return decodeAddr(b, index)
	})
}

// linkMessage encodes struct ifinfomsg for a link index, and its name
// when given.
func linkMessage(index int32, name string) []byte {
	w := nl.Writer{B: make([]byte, nl.IfInfoMsgLen, 64)}
	binary.NativeEndian.PutUint32(w.B[4:], uint32(index))
	if name != "" {
		w.String(uapi.IFLA_IFNAME, name)
	}
	return w.B
}

// newLinkMessage encodes the creation of a dummy link.
func newLinkMessage(name string) []byte {
	w := nl.Writer{B: linkMessage(0, name)}
	n := w.Begin(uapi.IFLA_LINKINFO)
	w.String(uapi.IFLA_INFO_KIND, "dummy")
	w.End(n)
	return w.B
}

// decodeAddr reads an RTM_NEWADDR message; ok is false when the address
// is on another link than index.
func decodeAddr(b []byte, index int32) (addr netip.Addr, ok bool, err error) {
	i, addr, err := nl.DecodeIfAddr(b)
	if err != nil || i != index {
		return netip.Addr{}, false, err
	}
	return addr, addr.IsValid(), nil
}
