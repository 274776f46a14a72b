// Package ipvs is moby/ipvs's API on package ipvs of this module: code
// written for github.com/moby/ipvs builds unchanged when its import path
// becomes github.com/ipvsplane/ipvsplane/compat/moby/ipvs.
//
// moby/ipvs is the IPVS client Docker, kube-proxy and kube-router program
// virtual servers with. Its interface (Handle, Service, Destination,
// Config, New, the Handle's methods, the ConnectionFlag*, ConnFwd* and
// scheduler constants) is kept here, field for field and signature for
// signature; the code underneath is package ipvs, so an importer gains its
// checks and, through Handle.Conn, errors naming what failed, batches,
// contexts and 64-bit counters, and can move call by call from the one API
// to the other.
//
// # The import path
//
// The path is moby/ipvs's own, moby/ipvs, under
// github.com/ipvsplane/ipvsplane/compat/: switching is one edit of the
// import line, which a sed can make.
// Its last element is ipvs, so the package name, and every ipvs.X in the
// importer's code, stays what it was. compat/ holds API shapes of other
// libraries kept for their importers, apart from this module's own
// packages; package ipvs itself is imported under another name beside it
// (the example does so).
//
// # What is the same
//
// Each call asks the kernel for the change moby/ipvs's asked for: but for
// the cases below, the same calls leave the kernel in the same state and
// fail with the same bare syscall.Errno, so err == syscall.EEXIST holds as
// it did, and the Get methods return what moby/ipvs returned (nil slices for
// none; IPv4 addresses of four bytes; flags with the kernel's Hashed bit;
// counters clipped to 32 bits as in the kernel's 32-bit attribute). A test
// in the repository's daemon module runs one scenario through both
// libraries in fresh network namespaces and compares the tables ipvsadm
// reads.
//
// # What differs
//
//   - Values package ipvs does not take are refused before any request,
//     with an *ipvs.OpError whose Err says why instead of an errno:
//     protocols other than TCP, UDP and SCTP, negative weights, forwarding
//     by cache bypass, netmasks and timeouts out of range. An unknown
//     address family fails with unix.EAFNOSUPPORT as the kernel did.
//   - Defaults where moby/ipvs let the kernel fail: an empty SchedName is
//     ipvsadm's default, wlc (the kernel refused "" with ENOENT); an IPv6
//     Netmask of 0 is 128 (the kernel refused it with EINVAL). An IPv4
//     Netmask of 0 is a single address (0xffffffff) where moby/ipvs gave the
//     kernel 0.0.0.0, which only matters to persistent services.
//   - ConnectionFlagLocalNode on write is masquerading, from which the
//     kernel marks a local destination again; the kernel sets that method
//     itself.
//   - Read values moby/ipvs lost are kept: weights above 65535 (it read 16
//     of the attribute's 32 bits) and the persistence engine's name.
//   - New never runs modprobe and fails with an error matching
//     ipvs.ErrNotSupported when the kernel has no IPVS; moby/ipvs ran
//     modprobe, logged the failure and returned a handle whose every call
//     failed. New takes the namespace's path only; the calling thread's
//     namespace is never changed.
//   - Calls take no context, as before; they wait as long as the kernel
//     takes. Handle.Conn's methods take one.
//
// Not provided: moby/ipvs's ns subpackage, which only its own tests use.
//
// # Testing
//
// FromConn wraps a Conn of package ipvstest's in-memory IPVS, so code
// written against this API is unit-tested without a kernel.
package ipvs
