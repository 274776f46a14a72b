// Package conntrack reads and cleans the kernel's connection tracking table
// over ctnetlink (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_CTNETLINK).
//
// Its reason to exist is the cleanup a service load balancer needs: when a
// service address or one of its endpoints goes away, UDP and SCTP clients
// keep sending to the dead destination until their entry is removed.
// [Conn.DeleteMatching] removes the entries a [Filter] selects; the
// constructors [ByDestination], [ByDestinationPort], [ByEndpoint] and
// [ByStaleEndpoints] build the filters of kube-proxy's cleanup, and
// [Conn.DeleteFunc] removes those a function picks among them, for a
// selection no Filter expresses (the stale entries of a whole service
// table, matched against it in a map). Dumps, counts,
// get, create (for tests and tools), single deletes and flushes complete the
// set.
//
// # Filtering in the kernel, and in Go
//
// A filtered delete dumps the table with as much of the filter as the
// running kernel applies itself: the family and mark on every kernel; the
// addresses, protocol and ports of both tuples through CTA_FILTER, which
// appeared in Linux 5.8 (tested on 5.10, 6.1 and 6.12); the zone from 6.8
// (older kernels accept and ignore it in a dump). Kernels before 5.8 skip
// CTA_FILTER as an attribute they do not know (nfnetlink parses liberally;
// read from kernel source, not tested), so there every dump is of the whole
// family and Go does all the filtering. It checks the rest in
// Go, then deletes the matches, many per write, each by original tuple and
// entry ID, so an entry that reappeared with the same tuple is left alone.
// With the kernel filtering, the work and memory follow the number of
// matches rather than the size of the table.
// A [Conn] learns what its kernel refuses (EOPNOTSUPP or EINVAL) and asks
// for less from then on; results are the same either way. IPv6 addresses
// are always compared in Go: the kernel's IPv6 comparison in dump filters is
// inverted (it returns the entries that differ) on Debian's 5.10 and 6.1
// and on 6.18.44, correct on Debian 13's 6.12.118, and a kernel cannot be
// asked which (TestKernelIPv6DumpFilter).
//
// Dumps the kernel marks interrupted (NLM_F_DUMP_INTR) are restarted, a few
// times, rather than returned partial; then [ErrDumpInterrupted]. An entry
// that expires between the dump and its delete is neither an error nor
// counted.
//
// # Errors
//
// Errors are [*OpError] values naming the operation and the object, in
// the shape every kernel package of this module uses: "conntrack: delete
// <tuple>: flow does not exist (no such file or directory)". They wrap
// the kernel's errno (errors.Is(err, unix.ENOENT)) and the sentinels
// ([ErrFlowNotExist], [ErrFlowExist], ...), with the kernel's
// extended-ack text when it gave one.
//
// # Privileges and namespaces
//
// Reading the table and changing it need CAP_NET_ADMIN in the network
// namespace the [Conn] works in: the caller's, or the one named by
// [Config.NetNS]. Each namespace has its own table. The kernel must have
// conntrack and ctnetlink (CONFIG_NF_CT_NETLINK); this package loads no
// modules.
//
// # Concurrency
//
// A [Conn] may be used from several goroutines; operations take turns on its
// socket. Every call that waits on the kernel takes a context whose deadline
// and cancellation reach the socket.
package conntrack
