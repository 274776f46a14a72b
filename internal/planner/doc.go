// Package planner computes what the kernel should hold for a model and
// the operations that get it there, without touching the kernel: the
// machinery behind the public dataplane/plan, which names its types and
// offers what the dataplane's importers use of it, and behind the
// dataplane, which uses the rest.
//
// [Build] computes the desired [KernelState] of a whole model: IPVS
// virtual and real servers, the addresses bound to the dummy device, the
// contents of the KUBE-* ipsets and the packet rules in their printed
// form. A [Planner] keeps the desired state between updates and works out
// which objects each change touches ([Scope]), so that a change to one
// service costs that service alone. [Diff] plans the operations ([Op])
// that turn an observed state into the desired one; a [Plan] prints as
// the dry-run text, one line per kernel operation, and holds them in the
// phases and batches the dataplane applies them in. A [Sweep] hands out a
// compare of everything in pieces.
//
// It imports no kernel package and no google/nftables: the rules are
// rendered by a [Rules] function the caller passes (the dataplane's is
// nftrules.Render).
package planner
