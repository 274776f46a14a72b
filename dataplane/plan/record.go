package plan

// Record changes the state as a successful op changes the kernel. The
// dataplane keeps its memory of what it programmed this way, and tests use
// it as a fake kernel.
func (k *KernelState) Record(op Op) {
	switch o := op.(type) {
	case CreateSet:
		k.Sets[o.Spec.Name] = o.Spec
		if k.Entries[o.Spec.Name] == nil {
			k.Entries[o.Spec.Name] = map[Entry]bool{}
		}
	case AddEntries:
		if k.Entries[o.Set] == nil {
			k.Entries[o.Set] = map[Entry]bool{}
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
		vk, _ := RealsTarget(op)
		k.Reals[vk] = k.Reals[vk].Changed(op)
	case Bind:
		k.Addresses[o.Addr] = true
	case Unbind:
		delete(k.Addresses, o.Addr)
	case FlushConntrack:
		// Conntrack is not part of the state.
	case RemoveKubeProxyRules:
		k.KubeProxyChains = nil
	}
}
