// Package ipsettest gives importers of package ipset a real *ipset.Conn
// whose socket reaches an in-memory ipset instead of the kernel's, so that
// code managing sets can be unit-tested without privileges, the ip_set
// modules or a network namespace.
//
// New makes a Kernel; Kernel.Dial returns a Conn on it, which has
// negotiated the protocol as on a host. Everything the Conn does goes
// through its own encoder and decoder and the same netlink exchange code
// as on a host: only the socket is fake. Kernel.Set, Kernel.Names and
// Kernel.Dump (in `ipset save` syntax) show what was written; the Conn's
// List reads it back too. Package ipset's own unit tests run on this fake,
// which keeps it faithful.
//
// # What the fake models
//
// It answers as net/netfilter/ipset/ip_set_core.c and the set types do,
// with the errnos package ipset's sentinels are tied to:
//
//   - protocol 7 (oldest accepted 6) on every request, IPSET_ERR_PROTOCOL
//     otherwise; the types hash:ip, hash:ip,port, hash:ip,port,ip,
//     hash:ip,port,net, hash:net, hash:net,port and bitmap:port, others
//     IPSET_ERR_FIND_TYPE (ipset.ErrTypeNotSupported);
//   - create: EEXIST (ipset.ErrSetExist) for a set that exists, unless
//     created with ipset.ExistOK and the same settings; the kernel's hash
//     defaults (hashsize 1024, rounded up to a power of two and at least
//     64; maxelem 65536); a bitmap's port range, given either way round;
//   - destroy and flush of one set or all, rename and swap: ENOENT
//     (ipset.ErrSetNotExist) for a missing set; a set that firewall rules
//     use (Kernel.SetReferences) cannot be destroyed (IPSET_ERR_BUSY) or
//     renamed (IPSET_ERR_REFERENCED), both ipset.ErrSetInUse; renaming
//     onto a name in use is IPSET_ERR_EXIST_SETNAME2; swap needs the same
//     type and family (IPSET_ERR_TYPE_MISMATCH) and leaves the names and
//     the rules with the kernel indexes, which destroyed sets free for the
//     next create;
//   - entries: add of one present and delete of one absent fail with
//     IPSET_ERR_EXIST (ipset.ErrEntryExist, ipset.ErrEntryNotExist) unless
//     ipset.ExistOK, when add updates the timeout, counters and comment;
//     test of a host address against a hash of networks matches the
//     networks holding it; networks are stored masked; a full hash is
//     IPSET_ERR_HASH_FULL (ipset.ErrSetFull), a port outside a bitmap
//     IPSET_ERR_BITMAP_RANGE (ipset.ErrEntryOutOfRange); an address of the
//     wrong family is IPSET_ERR_PROTOCOL, a missing protocol
//     IPSET_ERR_MISSING_PROTO; a timeout, counters or comment on a set
//     without them IPSET_ERR_TIMEOUT, _COUNTER, _COMMENT;
//   - bulk requests (IPSET_ATTR_ADT) applied in order up to the first
//     failure, which is reported with the request echoed and the failed
//     entry's line number in it, as ipset restore expects;
//   - list dumps of all sets or one, of names only or headers only, each
//     set's entries cut into several messages when there are many.
//
// # What it does not model
//
// Traffic and time: counters only hold what was written, and entries never
// expire, so a listed timeout is the one set rather than what remains.
// Ranges in one entry (IPSET_ATTR_IP_TO, PORT_TO, a prefix length on an
// address type), the nomatch flag, skbinfo, markmask, netmask and the
// list:set, bitmap:ip and hash types other than those above. The kernel's
// hash order: entries list in the order they were added. Memory size
// (listed as 0), bucket size and initval, and revision numbers, which are
// the fake's own. Privileges, module loading and the limit on the number
// of sets.
package ipsettest
