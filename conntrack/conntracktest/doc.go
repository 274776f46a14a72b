// Package conntracktest gives importers of package conntrack a real
// *conntrack.Conn whose socket reaches an in-memory connection tracking
// table instead of the kernel's, so that code cleaning up conntrack
// entries can be unit-tested without privileges or a network namespace.
//
// New makes a Kernel; Kernel.Add puts entries in it as traffic would;
// Kernel.Dial returns a Conn on it. Everything the Conn does goes through
// its own encoder and decoder and the same netlink exchange code as on a
// host: only the socket is fake. Kernel.Flows and Kernel.Dump show what
// is left; Format prints a kernel's dump the same way, so that a test can
// run one scenario on the fake and on a kernel and compare the two.
//
// # What the fake models
//
// It answers as net/netfilter/nf_conntrack_netlink.c does, with the
// errnos package conntrack's sentinels are tied to:
//
//   - entries keyed by tuple and zone, found by either their original or
//     their reply tuple, as the kernel's one hash table finds them; IDs
//     the kernel assigns, so a delete naming a stale ID is ENOENT
//     (conntrack.ErrFlowNotExist) and a reused tuple survives it;
//   - create: EEXIST (conntrack.ErrFlowExist) for a tracked tuple with
//     NLM_F_EXCL, an update of timeout, mark and status without; ENOENT
//     without NLM_F_CREATE; EINVAL without both tuples or a timeout;
//     entries confirmed from the start, so that a status without the
//     confirmed bit is EBUSY, as are setting expected or dying and clearing
//     seen-reply or assured; NAT bits, which the kernel keeps to itself,
//     ignored (verified on 6.18: TestScenarioMatchesKernel);
//   - get and delete by tuple (EINVAL without one, ENOENT when none is
//     tracked); a delete without a tuple is a flush, of the nfgenmsg's
//     family when its version is nonzero (Linux 4.19 on), else of both;
//   - dumps of one family or both, filtered as the newest kernels filter:
//     mark under mask, a zone other than the default one (Linux 6.8 on),
//     and CTA_FILTER's flagged fields of either tuple (Linux 5.8 on),
//     ports of TCP and UDP only; unknown filter flags are EOPNOTSUPP;
//   - timeouts that run: a dump reports the whole seconds left, and an
//     entry whose time is up is gone, as after the kernel's garbage
//     collection;
//   - the entry count of IPCTNL_MSG_CT_GET_STATS, which conntrack.Conn.Count
//     reads for All().
//
// # What it does not model
//
// Traffic: entries come from Add or create, never from packets, and their
// counters, protocol state, helpers, labels and NAT bindings do not exist.
// Dumps never interrupted (the table is read at once) and never refused
// for their size. A CTA_FILTER on a dump of both families, which package
// conntrack never sends, is EOPNOTSUPP here. IPv6 addresses in dump
// filters compare as intended, whereas many kernels invert that
// comparison (package conntrack sends none). Filtered flushes, expectations,
// per-CPU statistics other than the entry count, events, privileges and
// the table's size limit. Several namespaces: each Kernel is one.
package conntracktest
