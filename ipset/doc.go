// Package ipset manages the kernel's IP sets over netlink (NETLINK_NETFILTER,
// subsystem NFNL_SUBSYS_IPSET), without the ipset program.
//
// A Conn owns one netlink socket, optionally in another network namespace
// (Config.NetNS); sets live per namespace. Every call that talks to the
// kernel takes a context whose deadline and cancellation reach the socket.
// Dial agrees on the protocol version (7, or 6 on old kernels), and Create
// uses the newest revision of each set type the kernel offers.
//
// Besides one-entry operations, the package loads sets in bulk: AddEntries
// and DeleteEntries pack as many entries into a message as an attribute can
// hold and many messages into a write, and report each refused entry by its
// index; AddEntriesTo and DeleteEntriesFrom do the same for a caller that
// knows the set's type and family, without first asking the kernel for
// them. Replace makes a set hold exactly a list of entries, seen by readers
// all at once (fill a temporary set, swap, destroy). Sync changes only the
// difference, computed from one dump: a resync that repairs drift without
// rebuilding the set. In steady state, when the caller knows what changed,
// Apply sends just that change (Diff computes it from two lists), at a cost
// that does not grow with the set.
//
// Entries are typed (netip.Addr, netip.Prefix, inet.Protocol and port) and print and
// parse in the syntax of `ipset save`; ParseSave and WriteSave read and write
// whole save files.
//
// Errors are *OpError values naming the operation, the set and the entry,
// or for AddEntries and DeleteEntries a *BatchError listing them; they
// match both the package's sentinels (ErrSetNotExist, ErrEntryExist, ...)
// and the kernel's errno with errors.Is.
//
// Privileges: CAP_NET_ADMIN in the namespace's user namespace. A Conn is
// safe for concurrent use; its calls run one at a time.
//
// Package ipsettest gives a real Conn on an in-memory ipset, for unit tests
// of code that manages sets.
package ipset
