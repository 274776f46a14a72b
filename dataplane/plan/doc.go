// Package plan computes what the kernel should hold for a model and the
// operations that get it there, without touching the kernel.
//
// [Build] computes the desired [KernelState] of a whole model: IPVS
// virtual and real servers, the addresses bound to the dummy device, the
// contents of the KUBE-* ipsets and the packet rules in their printed
// form. [Diff] plans the operations ([Op]) that turn an observed state
// into the desired one; a [Plan] prints as the dry-run text, one line per
// kernel operation, and a dataplane's sync returns the one it carried
// out, whose operations a caller tells apart by their types ([AddReals],
// [ReplaceRules], ...). [VirtualKeys] and [HealthCheckAddresses] answer,
// for one service port or for the node, what a sync programs without
// computing all of it.
//
// The package holds what the dataplane's importers use. The planner
// behind it, which keeps the desired state between syncs so that a change
// to one service plans that service alone, is the dataplane's own
// (internal/planner); the types here are its types, so a plan the
// dataplane returns is read with them.
//
// It imports no kernel package and no google/nftables: the rules are
// rendered by a [Rules] function the caller passes (the dataplane's is
// nftrules.Render).
package plan
