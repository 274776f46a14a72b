// Package ipvs programs the Linux kernel's IP Virtual Server (IPVS), its
// layer-4 load balancer, over generic netlink (family "IPVS",
// include/uapi/linux/ip_vs.h).
//
// A Conn owns one netlink socket. Its methods create, update, delete and
// read virtual services (Service) and their real servers (Destination),
// flush and zero the table, and get and set connection timeouts. A Batch
// encodes changes as they are added and carries them to Conn.Apply, which
// writes them in as few sendmsg
// calls as the socket buffers allow and reports each operation's outcome:
// building a table of thousands of services costs a handful of system
// calls instead of one round trip per change. Conn.Table reads everything
// back; the kernel lists real servers one service at a time, so for a
// table of many services Table spreads those dumps over a few extra
// sockets in the same namespace.
//
// # Privileges and kernels
//
// Every IPVS command, reads included, needs CAP_NET_ADMIN in the user
// namespace that owns the network namespace. The kernel must have IPVS
// (CONFIG_IP_VS, module ip_vs and the ip_vs_* schedulers); this package
// never loads modules, and Dial fails with ErrNotSupported when the family
// is missing. The interface is stable since Linux 2.6.28; destinations of
// another family than their service need 3.18, 64-bit counters 4.1, tunnel
// settings 5.2: versions read from kernel source. TestDecodeOldKernel
// decodes what kernels before 3.18 and 4.1 send (no destination family,
// 32-bit counters only); the VM tests, tunnels and mixed families
// included, run on Linux 5.10, 6.1 and 6.12.
//
// # Namespaces
//
// IPVS state is per network namespace. Config.NetNS selects one by file
// descriptor; the calling thread's namespace is never changed.
//
// # Concurrency
//
// A Conn is safe for concurrent use: calls are serialized on its socket.
// Each call takes a context.Context whose deadline and cancellation reach
// the socket. A Batch is a plain value: fill it from one goroutine.
//
// # Errors
//
// Failures are *OpError values naming the operation and the service or
// destination, keeping the kernel's errno (errors.Is(err, unix.EEXIST))
// and its extended-ack message, and matching this package's sentinels
// (errors.Is(err, ErrServiceExist)). Apply returns a *BatchError holding
// one *OpError per failed operation.
//
// # Testing
//
// Package ipvstest gives a real Conn on an in-memory IPVS, for unit tests
// of code that programs virtual servers.
package ipvs
