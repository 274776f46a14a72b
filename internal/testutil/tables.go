package testutil

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The large tables the kernel packages' tests and benchmarks fill, and
// their comparisons with other libraries in daemon/compare, hold the same
// entries, made here for any entry type.

// Spread makes n entries over dests services: entry i gets a distinct
// client address and port, and the (i % dests)-th of SpreadService's
// addresses.
func Spread[E any](n, dests int, entry func(client netip.AddrPort, service netip.Addr) E) []E {
	out := make([]E, n)
	for i := range out {
		client := netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)})
		out[i] = entry(netip.AddrPortFrom(client, uint16(1024+i&0xff)), SpreadService(i%dests))
	}
	return out
}

// SpreadService is the i-th of the service addresses Spread spreads its
// entries over.
func SpreadService(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)})
}

// Keys makes n distinct entries of an address and a port (1 to 3); offset
// shifts them so that two lists differ.
func Keys[E any](n, offset int, entry func(netip.AddrPort) E) []E {
	out := make([]E, n)
	for i := range out {
		k := i + offset
		a := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		out[i] = entry(netip.AddrPortFrom(a, uint16(1+k%3)))
	}
	return out
}

// EnsureConntrackMax makes room for n entries in the namespace's
// connection tracking table. Where nf_conntrack_max is per namespace it is
// written from inside. Where a child namespace sees the global limit
// read-only (Linux 6.1 and 6.18 here), the limit must already be large
// enough, or, in the test VM, whose root namespace is disposable, it is
// raised there.
func EnsureConntrackMax(t testing.TB, ns *NetNS, n int) {
	t.Helper()
	err := ns.Do(func() error { return raiseConntrackMax(n) })
	if err != nil && InVM() {
		err = raiseConntrackMax(n)
	}
	if err != nil {
		t.Fatalf("making room for %d conntrack entries: %v", n, err)
	}
}

// raiseConntrackMax sets nf_conntrack_max to at least n in the calling
// thread's namespace.
func raiseConntrackMax(n int) error {
	const path = "/proc/sys/net/netfilter/nf_conntrack_max"
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || cur >= n {
		return err
	}
	return os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644)
}
