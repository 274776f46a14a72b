package dummytest

import (
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// protoKernel is RTPROT_KERNEL, the protocol of the routes the kernel
// adds for addresses of its own.
const protoKernel = 2

// serve plays the kernel for one write: each request in order, its
// replies, then its acknowledgement if it asked for one or failed.
func (k *Kernel) serve(reqs []netlink.Message) []netlink.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []netlink.Message
	for _, m := range reqs {
		out = append(out, k.answer(m)...)
	}
	return out
}

func (k *Kernel) answer(m netlink.Message) []netlink.Message {
	typ := uint16(m.Header.Type)
	if m.Header.Flags&netlink.Dump == netlink.Dump {
		return k.dump(m, typ)
	}
	var (
		out   []netlink.Message
		errno unix.Errno
	)
	switch typ {
	case uapi.RTM_GETLINK:
		var l *link
		if l, errno = k.getLink(m.Data); errno == 0 {
			out = append(out, reply(m, uapi.RTM_NEWLINK, 0, linkMessage(l)))
		}
	case uapi.RTM_NEWLINK:
		errno = k.newLink(m.Header.Flags, m.Data)
	case uapi.RTM_DELLINK:
		errno = k.delLink(m.Data)
	case uapi.RTM_NEWADDR:
		errno = k.newAddr(m.Header.Flags, m.Data)
	case uapi.RTM_DELADDR:
		errno = k.delAddr(m.Data)
	case uapi.RTM_NEWROUTE:
		errno = k.newRoute(m.Header.Flags, m.Data)
	case uapi.RTM_DELROUTE:
		errno = k.delRoute(m.Data)
	default:
		errno = unix.EOPNOTSUPP
	}
	if errno != 0 || m.Header.Flags&netlink.Acknowledge != 0 {
		out = append(out, nl.Ack(m, int(errno), ""))
	}
	return out
}

// dump answers a dump of links, addresses (of one family or both) or
// IPv4 routes, each in a message of its own, then NLMSG_DONE. The fake's
// sockets do not ask for strict checking, so, as for the kernel's, a dump
// is filtered by family only.
func (k *Kernel) dump(m netlink.Message, typ uint16) []netlink.Message {
	var family uint8
	if len(m.Data) > 0 {
		family = m.Data[0]
	}
	var out []netlink.Message
	add := func(typ uint16, data []byte) { out = append(out, reply(m, typ, netlink.Multi, data)) }
	switch typ {
	case uapi.RTM_GETLINK:
		for _, l := range k.links {
			add(uapi.RTM_NEWLINK, linkMessage(l))
		}
	case uapi.RTM_GETADDR:
		for _, l := range k.links {
			for _, p := range l.addrs {
				if family == uapi.AF_UNSPEC || (family == uapi.AF_INET) == p.Addr().Is4() {
					add(uapi.RTM_NEWADDR, addrMessage(l, p))
				}
			}
		}
	case uapi.RTM_GETROUTE:
		if family == uapi.AF_UNSPEC || family == uapi.AF_INET {
			for _, r := range k.routes {
				add(uapi.RTM_NEWROUTE, routeMessage(r))
			}
		}
	default:
		return []netlink.Message{nl.Ack(m, int(unix.EOPNOTSUPP), "")}
	}
	done := reply(m, uint16(netlink.Done), netlink.Multi, make([]byte, 4))
	return append(out, done)
}

// getLink finds the link a request names, by name if it has one, else by
// index: ENODEV if there is none.
func (k *Kernel) getLink(b []byte) (*link, unix.Errno) {
	r, ok := parseLink(b)
	if !ok {
		return nil, unix.EINVAL
	}
	l := k.byIndex(r.index)
	if r.name != "" {
		l = k.link(r.name)
	}
	if l == nil {
		return nil, unix.ENODEV
	}
	return l, 0
}

// newLink is rtnl_newlink: a link that exists is EEXIST with NLM_F_EXCL
// and left as it is without; a new one needs NLM_F_CREATE (else ENODEV)
// and a kind the kernel has a driver for (else EOPNOTSUPP). It starts
// down.
func (k *Kernel) newLink(flags netlink.HeaderFlags, b []byte) unix.Errno {
	r, ok := parseLink(b)
	if !ok || r.name == "" {
		return unix.EINVAL
	}
	if k.link(r.name) != nil {
		if flags&netlink.Excl != 0 {
			return unix.EEXIST
		}
		return 0
	}
	switch {
	case flags&netlink.Create == 0:
		return unix.ENODEV
	case r.kind == "", r.kind == "dummy" && k.opts.WithoutDriver:
		return unix.EOPNOTSUPP
	}
	k.addLink(r.name, r.kind)
	return 0
}

// delLink is rtnl_dellink: ENODEV for a missing link, EOPNOTSUPP for one
// without a kind (lo); the link goes with its addresses and routes.
func (k *Kernel) delLink(b []byte) unix.Errno {
	l, errno := k.getLink(b)
	switch {
	case errno != 0:
		return errno
	case l.kind == "":
		return unix.EOPNOTSUPP
	}
	k.deleteLink(l)
	return 0
}

// addrOn reads an address request and finds its link: EINVAL without an
// address, ENODEV without the link.
func (k *Kernel) addrOn(b []byte) (addrRequest, *link, unix.Errno) {
	r, ok := parseAddr(b)
	if !ok || !r.prefix.IsValid() {
		return r, nil, unix.EINVAL
	}
	l := k.byIndex(r.index)
	if l == nil {
		return r, nil, unix.ENODEV
	}
	return r, l, 0
}

// newAddr is inet_rtm_newaddr and inet6_rtm_newaddr: ENODEV without the
// link; an address it has is EEXIST unless NLM_F_REPLACE (and not
// NLM_F_EXCL) updates it. A new IPv4 address gets the kernel's local
// route in the local table, with itself as preferred source, even on a
// link that is down; IPv6 ones on a down link get none.
func (k *Kernel) newAddr(flags netlink.HeaderFlags, b []byte) unix.Errno {
	r, l, errno := k.addrOn(b)
	if errno != 0 {
		return errno
	}
	if slices.Contains(l.addrs, r.prefix) {
		if flags&netlink.Excl != 0 || flags&netlink.Replace == 0 {
			return unix.EEXIST
		}
		return 0
	}
	l.addrs = append(l.addrs, r.prefix)
	if a := r.prefix.Addr(); a.Is4() {
		k.routes = append(k.routes, route{
			dst: netip.PrefixFrom(a, 32), table: uapi.RT_TABLE_LOCAL, oif: l.index,
			protocol: protoKernel, scope: uapi.RT_SCOPE_HOST, typ: uapi.RTN_LOCAL, prefsrc: a,
		})
	}
	return 0
}

// delAddr is inet_rtm_deladdr and inet6_rtm_deladdr: ENODEV without the
// link, EADDRNOTAVAIL without the address. Removing an IPv4 address
// removes every route that has it as preferred source, the kernel's local
// route among them; removing a link's last IPv4 address disables IPv4 on
// it (fib_disable_ip), which removes every route through it.
func (k *Kernel) delAddr(b []byte) unix.Errno {
	r, l, errno := k.addrOn(b)
	if errno != 0 {
		return errno
	}
	n := len(l.addrs)
	l.addrs = slices.DeleteFunc(l.addrs, func(p netip.Prefix) bool { return p == r.prefix })
	if len(l.addrs) == n {
		return unix.EADDRNOTAVAIL
	}
	if a := r.prefix.Addr(); a.Is4() {
		last := !slices.ContainsFunc(l.addrs, func(p netip.Prefix) bool { return p.Addr().Is4() })
		k.routes = slices.DeleteFunc(k.routes, func(rt route) bool { return rt.prefsrc == a || (last && rt.oif == l.index) })
	}
	return 0
}

// newRoute is fib_table_insert for IPv4 (IPv6 routes through a link that
// is down are ENETDOWN, others EOPNOTSUPP in the fake): ENODEV without
// the output link; a route identical to one present is EEXIST, one that
// differs (another protocol or preferred source) goes beside it, unless
// NLM_F_REPLACE replaces the first of the same destination and table.
func (k *Kernel) newRoute(flags netlink.HeaderFlags, b []byte) unix.Errno {
	r, ok := parseRoute(b)
	if !ok || !r.dst.IsValid() {
		return unix.EINVAL
	}
	l := k.byIndex(r.oif)
	switch {
	case l == nil:
		return unix.ENODEV
	case r.family == uapi.AF_INET6 && !l.up:
		return unix.ENETDOWN
	case r.family != uapi.AF_INET:
		return unix.EOPNOTSUPP
	case slices.Contains(k.routes, r.route) && flags&netlink.Replace == 0:
		return unix.EEXIST
	}
	if flags&netlink.Replace != 0 {
		i := slices.IndexFunc(k.routes, func(x route) bool { return x.dst == r.dst && x.table == r.table })
		if i >= 0 {
			k.routes[i] = r.route
			return 0
		}
	}
	k.routes = append(k.routes, r.route)
	return 0
}

// delRoute is fib_table_delete: the first route of the destination and
// table that matches what else the request sets (type, protocol, scope
// unless RT_SCOPE_NOWHERE, preferred source, output link); ESRCH if none.
func (k *Kernel) delRoute(b []byte) unix.Errno {
	r, ok := parseRoute(b)
	if !ok || !r.dst.IsValid() {
		return unix.EINVAL
	}
	i := slices.IndexFunc(k.routes, func(x route) bool {
		return x.dst == r.dst && x.table == r.table &&
			(r.typ == 0 || x.typ == r.typ) &&
			(r.protocol == 0 || x.protocol == r.protocol) &&
			(r.scope == uapi.RT_SCOPE_NOWHERE || x.scope == r.scope) &&
			(!r.prefsrc.IsValid() || x.prefsrc == r.prefsrc) &&
			(r.oif == 0 || x.oif == r.oif)
	})
	if i < 0 {
		return unix.ESRCH
	}
	k.routes = slices.Delete(k.routes, i, i+1)
	return 0
}
