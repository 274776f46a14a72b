package planner

import (
	"fmt"
	"maps"
)

// Grow makes room in the state for what p adds, as slices.Grow does for
// a slice: a first sync records tens of thousands of virtual servers, and
// maps grown one entry at a time are rehashed over and over on the way.
func (k *KernelState) Grow(p *Plan) {
	var virtual, addresses int
	for op := range p.All() {
		switch op.(type) {
		case AddVirtual:
			virtual++
		case Bind:
			addresses++
		}
	}
	k.Virtual = grown(k.Virtual, virtual)
	k.Reals = grown(k.Reals, virtual)
	k.Addresses = grown(k.Addresses, addresses)
}

// grown returns m, or a copy of it with room for n more entries when
// that is more than it holds: a map is made at its size or grows as it
// fills.
func grown[K comparable, V any](m map[K]V, n int) map[K]V {
	if n <= len(m) {
		return m
	}
	out := make(map[K]V, len(m)+n)
	maps.Copy(out, m)
	return out
}

// Record changes the state as successful ops change the kernel, in
// order. The dataplane keeps its memory of what it programmed this way,
// and tests use it as a fake kernel. The changes to one virtual server's
// real servers are recorded together, so its list is copied once, not
// once per operation.
func (k *KernelState) Record(ops ...Op) {
	switch len(ops) {
	case 0:
		return
	case 1:
		k.record(ops[0])
		return
	}
	realOps := map[VirtualKey][]Op{}
	var order []VirtualKey
	for _, op := range ops {
		vk, ok := realsTarget(op)
		if !ok {
			k.record(op)
			continue
		}
		if _, seen := realOps[vk]; !seen {
			order = append(order, vk)
		}
		realOps[vk] = append(realOps[vk], op)
	}
	for _, vk := range order {
		k.Reals[vk] = k.Reals[vk].changed(realOps[vk]...)
	}
}

func (k *KernelState) record(op Op) {
	switch o := op.(type) {
	case CreateSet:
		k.Sets[o.Spec.Name] = o.Spec
		if k.Entries[o.Spec.Name] == nil {
			k.Entries[o.Spec.Name] = map[Entry]bool{}
		}
	case AddEntries:
		if len(k.Entries[o.Set]) == 0 {
			// Made at its size: a first sync adds a set's entries at once.
			k.Entries[o.Set] = make(map[Entry]bool, len(o.Entries))
		}
		for _, e := range o.Entries {
			k.Entries[o.Set][e] = true
		}
	case DelEntries:
		for _, e := range o.Entries {
			delete(k.Entries[o.Set], e)
		}
	case ReplaceRules:
		k.Rules = o.Rules
	case AddVirtual:
		k.Virtual[o.Virtual.VirtualKey] = o.Virtual
	case UpdateVirtual:
		k.Virtual[o.Virtual.VirtualKey] = o.Virtual
	case DeleteVirtual:
		delete(k.Virtual, o.Virtual)
		delete(k.Reals, o.Virtual)
	case AddReals, UpdateReal, DeleteReal:
		vk, _ := realsTarget(op)
		k.Reals[vk] = k.Reals[vk].changed(op)
	case Bind:
		k.Addresses[o.Addr] = true
	case Unbind:
		delete(k.Addresses, o.Addr)
	case ReconcileFlows:
		// Conntrack is not part of the state.
	case RemoveKubeProxyRules:
		k.KubeProxyChains = nil
	default:
		// A kind of operation added without its record (everyop's test).
		panic(fmt.Sprintf("planner: no record of %T", op))
	}
}
