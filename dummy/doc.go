// Package dummy manages a dummy network device and the addresses bound to
// it, over rtnetlink.
//
// A load balancer built on IPVS binds each virtual IP to a dummy device so
// that the node accepts packets for it; kube-proxy's device is named
// kube-ipvs0. The device stays down, as kube-proxy leaves it: the kernel
// still treats its addresses as local, while a down device neither answers
// neighbour discovery for them nor routes through them.
//
// # Privileges and namespaces
//
// Creating links and binding addresses needs CAP_NET_ADMIN in the network
// namespace the [Conn] works in: the caller's, or the one named by
// [Config.NetNS]. The kernel must have the dummy driver (CONFIG_DUMMY); this
// package loads no modules. A missing driver shows as [ErrNotSupported].
//
// # Concurrency
//
// A [Conn] and the [Device] values it returns may be used from several
// goroutines; calls are serialized on the connection's socket.
//
// # Errors
//
// Failures are [*OpError] values naming the operation and the link or
// address ("dummy: bind 10.96.0.1 on kube-ipvs0: ..."), keeping the
// kernel's errno (errors.Is(err, unix.ENODEV)) and matching the package's
// sentinels (errors.Is(err, ErrLinkNotExist)). BindAll and UnbindAll
// return a [*BatchError] holding one *OpError per failed address.
//
// # Addresses
//
// IPv4 addresses are bound as /32, IPv6 addresses as /128 without duplicate
// address detection (a VIP is shared by design, and detection on a down link
// would leave it tentative). Binding a bound address and unbinding an unbound
// one succeed, so a caller can repeat any step after a failure.
//
// # Local routes
//
// The kernel walks a device's whole IPv4 address list on every address it
// adds or removes, so binding n addresses costs n² steps; at tens of
// thousands of services that dominates. With [Config.Binding] set to
// [BindLocalRoutes], an IPv4 address is bound instead as the route the
// kernel installs for an address of its own: type local, scope host, in
// the local table, through the device, with protocol [RouteProtocol] so
// that the package reads and deletes only its own routes. Unlike the
// kernel's own route it has no preferred source: the kernel deletes every
// route whose preferred source is an address being removed, so switching
// a node from addresses to routes would lose each route as its address
// went; the node's own connections to such an address leave from one of
// its other addresses. The kernel delivers packets for it locally all the
// same, and inserting it into the routing trie walks no list. Such an
// address is not listed by `ip addr show` but by `ip route show table
// local proto 201`. IPv6 addresses are bound as addresses in both modes.
//
// Each mode reads only its own bindings; [Device.Leftovers] and
// [Device.UnbindLeftovers] find and remove those of the other mode, left by
// an earlier run configured the other way.
package dummy
