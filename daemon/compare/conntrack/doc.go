// Package conntrack compares package conntrack of the library with vishvananda/netlink: its
// tests and benchmarks run both on the same kernel. They live in the daemon
// module so that the library's module does not require vishvananda/netlink.
package conntrack
