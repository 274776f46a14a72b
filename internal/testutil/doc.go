// Package testutil holds what ipvsplane's tests share: the rule that a test
// needing a kernel feature fails in CI instead of skipping, fresh network
// namespaces for host-kernel tests (joined by veth pairs), running the real
// userspace programs as independent readers, a file-descriptor leak check,
// and the entries of the large tables that the kernel packages' tests and
// daemon/compare's benchmarks fill alike. It depends on nothing beyond the
// library's own requirements, since the library's tests import it.
//
// Tests come in three tiers, chosen by build tags:
//
//   - unit (no tag): no privileges, no kernel; run anywhere.
//   - host (tag hosttest): the host kernel's ipset, conntrack and nftables,
//     always inside a network namespace the test creates.
//   - vm (tag vmtest): run inside a virtual machine by daemon/internal/testing/vmtest,
//     for IPVS, the dummy driver and everything end to end.
package testutil
