package dummy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Binding is how a [Device] binds a service address, chosen with
// [Config.Binding].
type Binding uint8

const (
	// BindAddresses binds each service address as an address of the
	// device, as kube-proxy does; `ip addr show` lists them.
	BindAddresses Binding = iota
	// BindLocalRoutes binds each IPv4 service address as a local route
	// through the device in the local routing table, the route the kernel
	// installs for an address of its own, with protocol [RouteProtocol].
	// The kernel walks a device's whole IPv4 address list on every address
	// added or removed, so binding many addresses is quadratic; inserting
	// a route is not. IPv6 addresses are still bound as addresses: their
	// insertion does not walk the list, and the kernel refuses a local
	// IPv6 route through a device that is down (ENETDOWN).
	BindLocalRoutes
)

// String returns the name the daemon's option uses: "address" or
// "local-route".
func (b Binding) String() string {
	switch b {
	case BindAddresses:
		return "address"
	case BindLocalRoutes:
		return "local-route"
	}
	return fmt.Sprintf("Binding(%d)", uint8(b))
}

// RouteProtocol is the routing protocol number (rtm_protocol) of the local
// routes [BindLocalRoutes] creates, so that the package reads and deletes
// only its own routes: `ip route show table local proto 201` lists them.
// Numbers up to RTPROT_STATIC (4) are the kernel's; 201 is in neither
// include/uapi/linux/rtnetlink.h nor iproute2's rt_protos.
const RouteProtocol uint8 = 201

// asRoute says whether the device binds a as a local route.
func (d *Device) asRoute(a netip.Addr) bool {
	return d.binding == BindLocalRoutes && a.Is4()
}

// Leftovers returns the service addresses the device holds bound the other
// way than its Binding says, left by an earlier run in the other mode: in
// BindLocalRoutes mode its IPv4 addresses, in BindAddresses mode its local
// routes of protocol RouteProtocol. Each family is in ascending order.
func (d *Device) Leftovers(ctx context.Context) ([]netip.Addr, error) {
	return d.list(ctx, func(ctx context.Context, index int32) ([]netip.Addr, error) {
		if d.binding == BindLocalRoutes {
			addrs, err := d.addresses(ctx, index)
			return only(addrs, netip.Addr.Is4), err
		}
		return d.routes(ctx, index)
	})
}

// UnbindLeftovers removes addresses that Leftovers returned, bound the
// other way, in few system calls; failures come in a *BatchError.
func (d *Device) UnbindLeftovers(ctx context.Context, addrs []netip.Addr) error {
	o := *d
	o.binding = BindLocalRoutes
	if d.binding == BindLocalRoutes {
		o.binding = BindAddresses
	}
	return o.addrBatch(ctx, "unbind", addrs, true)
}

// bound lists the service addresses bound in the device's mode; in
// BindLocalRoutes mode IPv4 addresses of the device are leftovers, not
// bound.
func (d *Device) bound(ctx context.Context, index int32) ([]netip.Addr, error) {
	addrs, err := d.addresses(ctx, index)
	if err != nil || d.binding != BindLocalRoutes {
		return addrs, err
	}
	routes, err := d.routes(ctx, index)
	return append(routes, only(addrs, netip.Addr.Is6)...), err
}

// only returns the addresses keep is true of.
func only(addrs []netip.Addr, keep func(netip.Addr) bool) []netip.Addr {
	var kept []netip.Addr
	for _, a := range addrs {
		if keep(a) {
			kept = append(kept, a)
		}
	}
	return kept
}

// routes dumps the namespace's IPv4 routes and returns the destinations of
// the package's local routes through link index.
func (d *Device) routes(ctx context.Context, index int32) ([]netip.Addr, error) {
	return d.dump(ctx, "route", uapi.RTM_GETROUTE, uapi.RTM_NEWROUTE, dumpRouteMessage(), func(b []byte) (netip.Addr, bool, error) {
		return decodeRoute(b, index)
	})
}

// rtmsgLen is the length of struct rtmsg, from
// include/uapi/linux/rtnetlink.h.
const rtmsgLen = 12

// routeMessage encodes struct rtmsg and its attributes for the local route
// of a through link index: host prefix, table local, scope host, type
// local, protocol RouteProtocol, RTA_DST, RTA_OIF and RTA_TABLE. Unlike
// the kernel's own local route for an address it has no preferred source
// (RTA_PREFSRC): the kernel deletes every route whose preferred source is
// an address being removed, so switching a node from addresses to routes
// would lose each route as its address went.
func routeMessage(index int32, a netip.Addr) []byte {
	w := nl.Writer{B: make([]byte, rtmsgLen, 64)}
	w.B[0], w.B[1] = uapi.AF_INET, 32
	w.B[4] = uapi.RT_TABLE_LOCAL
	w.B[5] = RouteProtocol
	w.B[6] = uapi.RT_SCOPE_HOST
	w.B[7] = uapi.RTN_LOCAL
	w.Addr(uapi.RTA_DST, a)
	w.Uint32(uapi.RTA_OIF, uint32(index))
	w.Uint32(uapi.RTA_TABLE, uapi.RT_TABLE_LOCAL)
	return w.B
}

// dumpRouteMessage asks for every IPv4 route; the kernel filters dumps
// only for sockets with strict checking, so decodeRoute filters.
func dumpRouteMessage() []byte {
	b := make([]byte, rtmsgLen)
	b[0] = uapi.AF_INET
	return b
}

// decodeRoute reads an RTM_NEWROUTE message; ok is false unless it is a
// local IPv4 host route of protocol RouteProtocol in table local through
// link index.
func decodeRoute(b []byte, index int32) (dst netip.Addr, ok bool, err error) {
	if len(b) < rtmsgLen {
		return dst, false, fmt.Errorf("route message of %d bytes", len(b))
	}
	family, bits, protocol, typ := b[0], b[1], b[5], b[7]
	table := uint32(b[4])
	var oif uint32
	d := nl.NewReader(b[rtmsgLen:], "route")
	for d.Next() {
		switch d.Type() {
		case uapi.RTA_DST:
			dst = d.Addr()
		case uapi.RTA_OIF:
			oif = d.Uint32()
		case uapi.RTA_TABLE:
			// rtm_table holds only 8 bits of the table's id.
			table = d.Uint32()
		}
	}
	if err := d.Err(); err != nil {
		return netip.Addr{}, false, err
	}
	ours := family == uapi.AF_INET && bits == 32 && protocol == RouteProtocol &&
		typ == uapi.RTN_LOCAL && table == uapi.RT_TABLE_LOCAL &&
		oif == uint32(index) && dst.Is4()
	return dst, ours, nil
}

// dump runs one dump of request type typ, keeping the replies of type
// reply that decode says are on the device; it retries a dump that the
// kernel reports as interrupted by a concurrent change.
func (d *Device) dump(ctx context.Context, what string, typ, reply uint16, data []byte, decode func([]byte) (netip.Addr, bool, error)) ([]netip.Addr, error) {
	for range dumpAttempts {
		var (
			addrs       []netip.Addr
			interrupted bool
			decodeErr   error
		)
		r := &nl.Request{Type: typ, Flags: netlink.Dump, Data: data}
		r.Handle = func(m netlink.Message) {
			interrupted = interrupted || m.Header.Flags&netlink.DumpInterrupted != 0
			if m.Header.Type != netlink.HeaderType(reply) {
				return
			}
			a, ok, err := decode(m.Data)
			if err != nil && decodeErr == nil {
				decodeErr = err
			}
			if ok {
				addrs = append(addrs, a)
			}
		}
		if err := d.conn.nl.Exchange(ctx, r); err != nil {
			return nil, err
		}
		switch {
		case r.Err != nil:
			return nil, classify(r.Err)
		case decodeErr != nil:
			return nil, decodeErr
		case !interrupted:
			return addrs, nil
		}
	}
	return nil, fmt.Errorf("%s dump interrupted by changes on every attempt", what)
}

// ignorable reports the errors that mean a request of type typ found its
// work already done: binding a bound route (EEXIST: the kernel found the
// same route), or unbinding a missing address (EADDRNOTAVAIL, ENOENT) or
// route (ESRCH, ENOENT).
func ignorable(typ uint16, err error) bool {
	switch typ {
	case uapi.RTM_NEWROUTE:
		return errors.Is(err, unix.EEXIST)
	case uapi.RTM_DELROUTE:
		return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
	case uapi.RTM_DELADDR:
		return errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT)
	}
	return false
}

// request returns the message binding or unbinding a on link index.
func (d *Device) request(op string, index int32, a netip.Addr) nl.Request {
	r := nl.Request{Flags: netlink.Acknowledge}
	switch {
	case d.asRoute(a) && op == "bind":
		// Without NLM_F_REPLACE: an address also bound has the kernel's
		// own local route for it, which must stay; the kernel adds ours
		// beside it, or reports EEXIST for ours.
		r.Type, r.Flags, r.Data = uapi.RTM_NEWROUTE, r.Flags|netlink.Create, routeMessage(index, a)
	case d.asRoute(a):
		r.Type, r.Data = uapi.RTM_DELROUTE, routeMessage(index, a)
	case op == "bind":
		r.Type, r.Flags, r.Data = uapi.RTM_NEWADDR, r.Flags|netlink.Create|netlink.Replace, addrMessage(index, a)
	default:
		r.Type, r.Data = uapi.RTM_DELADDR, addrMessage(index, a)
	}
	return r
}
