// Package dataplane turns the desired state of a node's services (its own
// small model: service ports, endpoints, node settings) into the kernel
// state of kube-proxy's IPVS mode, as a plan of kernel operations that
// prints as text and applies incrementally.
//
// The pieces, each usable alone:
//
//   - [Build] computes the desired [KernelState] of a model: IPVS virtual
//     and real servers, the addresses bound to the dummy device, the
//     contents of the KUBE-* ipsets and the packet-rule tables. Invalid
//     service ports are reported with [FieldError] (object and field) and
//     left out; the others are still programmed.
//   - [Diff] plans the operations that turn an observed state into a
//     desired one, in an order that never sends traffic where nothing
//     handles it: sets and rules first, then virtual and real servers,
//     then the addresses that draw traffic; removals in reverse; conntrack
//     cleanup last. Real servers whose endpoint left drain at weight 0.
//   - [Planner] keeps the desired state between syncs, so that a change to
//     one service plans that service alone, whatever the number of
//     services.
//   - [WriteRules] replaces ipvsplane's nftables tables in one transaction;
//     the rules match the ipsets through the kernel's xt set match, so
//     there are as many rules for ten services as for fifty thousand.
//
// docs/kube-proxy-ipvs-semantics.md describes the behaviour reproduced
// here, and where ipvsplane differs on purpose.
package dataplane
