// Package inet names what every layer of ipvsplane shares about a packet:
// its address family and its IP protocol, with the kernel's own numbers
// (AF_INET, AF_INET6, IPPROTO_*). The kernel packages (ipvs, ipset,
// conntrack) and the dataplane's model use these types directly, so a
// value passes from a Service to a netlink attribute without translation.
//
// The package imports nothing but the standard library and holds no state:
// a controller, a CNI or a test can name protocols without pulling in
// netlink.
package inet
