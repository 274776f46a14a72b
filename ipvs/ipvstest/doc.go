// Package ipvstest gives importers of package ipvs a real *ipvs.Conn whose
// socket reaches an in-memory IPVS instead of the kernel's, so that code
// programming virtual servers can be unit-tested without privileges, a
// kernel module or a network namespace.
//
// New makes a Kernel; Kernel.Dial returns a Conn on it. Everything the
// Conn does goes through its own encoder and decoder and the same netlink
// exchange code as on a host: only the socket is fake. Kernel.Table and
// Kernel.Dump show what was written; ipvs.Conn.Table reads it back too.
// Package ipvs's own unit tests run on this fake, which keeps it faithful.
//
// # What the fake models
//
// It answers as include/uapi/linux/ip_vs.h and net/netfilter/ipvs/ip_vs_ctl.c
// do, with the errnos package ipvs's sentinels are tied to:
//
//   - services keyed by family and firewall mark, or by family, protocol,
//     address and port; creating one that exists is EEXIST
//     (ipvs.ErrServiceExist), naming a missing one ESRCH
//     (ipvs.ErrServiceNotExist), a scheduler or persistence engine a stock
//     kernel lacks ENOENT (ipvs.ErrSchedulerNotSupported); services read
//     back with the Hashed flag the kernel adds;
//   - destinations keyed by address and port within their service: EEXIST
//     (ipvs.ErrDestinationExist) and ENOENT (ipvs.ErrDestinationNotExist);
//     a negative weight or a lower threshold above the upper is ERANGE, a
//     destination of another family than its service's without tunnel
//     forwarding EINVAL; listing a missing service's destinations is empty;
//   - timeouts, where zero leaves one unchanged; flush; zero; the version
//     (1.2.1) and connection table size (4096);
//   - the socket: each write answered message by message, so a batch gets
//     every operation's own outcome; capped acknowledgements with
//     Options.Message as their extended-ack text; dumps in parts
//     (Options.DumpPart), the next made only when the previous is read, and
//     EBUSY for a dump asked while another is unread; deadlines; the socket
//     buffer sizes (Options.ReadBuffer, WriteBuffer) by which a Conn cuts
//     batches into writes.
//
// # What it does not model
//
// Traffic: statistics are zero, and Zero has nothing to clear; connection
// counts are what Kernel.SetConnections set, which a test stands in for
// traffic with. Checks the kernel makes against the host: whether an address
// is local (forwarding reported as ipvs.LocalNode), loading modules,
// privileges (EPERM), memory limits (ENOMEM, ENOBUFS). Kernels older than
// the newest interface: the fake always sends destination families,
// 64-bit counters and tunnel settings. Several namespaces: each Kernel is
// one. Table reads by Conn.Table use the one socket, never peers.
package ipvstest
