// Package dummytest gives importers of package dummy a real *dummy.Conn
// whose socket reaches an in-memory rtnetlink instead of the kernel's, so
// that code managing a dummy device and its service addresses can be
// unit-tested without privileges, the dummy driver or a network
// namespace.
//
// New makes a Kernel; Kernel.Dial returns a Conn on it, binding as the
// given dummy.Binding says. Everything the Conn does goes through its own
// encoder and decoder and the same netlink exchange code as on a host:
// only the socket is fake. Kernel.AddLink and Kernel.DeleteLink change
// links as another program would, to test a device deleted and created
// anew behind the code's back; Kernel.Dump prints links, addresses and
// routes.
//
// # What the fake models
//
// It answers as net/core/rtnetlink.c, net/ipv4/devinet.c, fib_frontend.c
// and fib_trie.c and net/ipv6/addrconf.c do, with the errnos package
// dummy's sentinels are tied to:
//
//   - links by name and index, indexes never reused: a get or delete of a
//     missing link is ENODEV (dummy.ErrLinkNotExist); a create of one
//     that exists EEXIST with NLM_F_EXCL; a create without NLM_F_CREATE
//     ENODEV; a kind without a driver EOPNOTSUPP (dummy.ErrNotSupported,
//     all dummy links with Options.WithoutDriver, as on a kernel without
//     CONFIG_DUMMY); lo, index 1, cannot be deleted; a new link is down;
//   - addresses on a link (ENODEV without it): adding one present is
//     EEXIST unless NLM_F_REPLACE updates it, removing one absent
//     EADDRNOTAVAIL; an IPv4 address brings the kernel's local route
//     (table local, protocol kernel, scope host, the address as preferred
//     source), even on a link that is down, and removing the address
//     removes every route with it as preferred source; removing a link's
//     last IPv4 address removes every route through the link (found by
//     TestScenarioMatchesKernel in the VM); a deleted link takes its
//     addresses and routes;
//   - IPv4 routes: adding one identical to a route present is EEXIST, one
//     that differs only in protocol or preferred source goes beside it;
//     deleting matches destination and table and whatever else the request
//     sets, ESRCH if nothing does; an IPv6 route through a link that is
//     down is ENETDOWN;
//   - dumps of links, of addresses of one family or both, and of IPv4
//     routes, filtered by family only, as for a socket without strict
//     checking.
//
// # What it does not model
//
// Traffic, links going up or down, IPv6 routes other than that refusal,
// routing tables other than as a number on each route, address lifetimes,
// labels and scopes other than a host's, duplicate address detection,
// multicast and broadcast routes, the loopback addresses (lo has none
// here), interrupted dumps, events, privileges and module loading. Several
// namespaces: each Kernel is one.
package dummytest
