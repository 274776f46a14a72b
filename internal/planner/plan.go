package planner

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Drain settings for real servers whose endpoint went away.
type Drain struct {
	// Since records when each real server was set to weight 0.
	Since map[VirtualKey]map[RealKey]time.Time
	// Timeout bounds draining: a real server still holding connections
	// after it is deleted anyway.
	Timeout time.Duration
	// Timeouts override Timeout for the real servers of some virtual
	// servers (a service's own bound).
	Timeouts map[VirtualKey]time.Duration
	Now      time.Time
}

// Scope limits a plan to the objects some change touched. With All set
// (FullScope) it covers everything; NewScope makes an empty one for
// Touch and Merge to fill.
type Scope struct {
	All bool
	// Global covers the node-wide objects a full compare looks at besides
	// the others: which sets exist, the packet rules, and the chains
	// kube-proxy left. A Sweep's first piece has it.
	Global    bool
	Virtual   map[VirtualKey]bool
	Addresses map[netip.Addr]bool
	// Entries holds the touched entries per set.
	Entries map[string]map[Entry]bool
}

// FullScope covers every object.
var FullScope = Scope{All: true}

// DiffInputs is what Diff compares.
type DiffInputs struct {
	// Observed must hold only what ipvsplane owns: whatever it holds
	// beyond Desired is removed.
	Observed, Desired *KernelState
	// Services names the service each desired virtual server belongs to;
	// it orders the plan (the API server's own service first) and labels
	// its lines.
	Services map[VirtualKey]model.ServicePortName
	// Scope limits the compare: FullScope for everything.
	Scope Scope
	Drain Drain
}

// Diff plans the operations that turn in.Observed into in.Desired within
// in.Scope.
func Diff(in DiffInputs) *Plan {
	observed, desired, services, scope, drain := in.Observed, in.Desired, in.Services, in.Scope, in.Drain
	var ops []Op
	if scope.All || scope.Global {
		for _, name := range slices.Sorted(maps.Keys(desired.Sets)) {
			if _, ok := observed.Sets[name]; !ok {
				ops = append(ops, CreateSet{Spec: desired.Sets[name].Sized(len(desired.Entries[name]))})
			}
		}
		if desired.Rules != observed.Rules {
			ops = append(ops, ReplaceRules{Rules: desired.Rules})
		}
		if len(observed.KubeProxyChains) > 0 {
			ops = append(ops, RemoveKubeProxyRules{Chains: observed.KubeProxyChains})
		}
	}
	ops = append(ops, diffEntries(observed, desired, scope)...)
	ops = append(ops, diffVirtual(observed, desired, services, scope, drain)...)
	ops = append(ops, diffAddresses(observed, desired, scope)...)
	return New(ops...)
}

func diffEntries(observed, desired *KernelState, scope Scope) []Op {
	var ops []Op
	for _, set := range setsToCompare(observed, desired, scope) {
		want, have := desired.Entries[set], observed.Entries[set]
		var add, del []Entry
		if scope.All {
			// Only the differences are collected and sorted: a full
			// compare finds few, a first sync finds every entry new.
			if n := len(want) - len(have); n > 0 {
				add = make([]Entry, 0, n)
			}
			for e := range want {
				if !have[e] {
					add = append(add, e)
				}
			}
			for e := range have {
				if !want[e] {
					del = append(del, e)
				}
			}
		} else {
			for e := range scope.Entries[set] {
				switch {
				case want[e] && !have[e]:
					add = append(add, e)
				case !want[e] && have[e]:
					del = append(del, e)
				}
			}
		}
		if len(add) > 0 {
			slices.SortFunc(add, Entry.compare)
			ops = append(ops, AddEntries{Set: set, Entries: add})
		}
		if len(del) > 0 {
			slices.SortFunc(del, Entry.compare)
			ops = append(ops, DelEntries{Set: set, Entries: del})
		}
	}
	return ops
}

// Sized returns spec with room for entries: its maxelem (kube-proxy's
// 65,536) while that holds them, which keeps the set's options identical
// to those kube-proxy creates it with (`ipset create -exist` fails on any
// difference, so a set kube-proxy did not make its way breaks a
// handover); beyond it, a power of two at least twice as large, since the
// limit would refuse the rest (a set cannot grow its maxelem once made:
// one that fills is replaced by a larger one).
func (spec SetSpec) Sized(entries int) SetSpec {
	if spec.MaxElem == 0 || uint64(entries) <= uint64(spec.MaxElem) {
		return spec
	}
	for uint64(spec.MaxElem) < 2*uint64(entries) && spec.MaxElem < 1<<31 {
		spec.MaxElem *= 2
	}
	return spec
}

// setsToCompare returns, sorted, the sets a diff looks at: all of them
// for a full compare, else those the scope names.
func setsToCompare(observed, desired *KernelState, scope Scope) []string {
	if !scope.All {
		return slices.Sorted(maps.Keys(scope.Entries))
	}
	sets := map[string]bool{}
	for name := range desired.Entries {
		sets[name] = true
	}
	for name := range observed.Entries {
		sets[name] = true
	}
	return slices.Sorted(maps.Keys(sets))
}

func diffAddresses(observed, desired *KernelState, scope Scope) []Op {
	var candidates []netip.Addr
	if scope.All {
		for a := range desired.Addresses {
			if !observed.Addresses[a] {
				candidates = append(candidates, a)
			}
		}
		for a := range observed.Addresses {
			if !desired.Addresses[a] {
				candidates = append(candidates, a)
			}
		}
	} else {
		for a := range scope.Addresses {
			if desired.Addresses[a] != observed.Addresses[a] {
				candidates = append(candidates, a)
			}
		}
	}
	slices.SortFunc(candidates, netip.Addr.Compare)
	var ops []Op
	for _, a := range candidates {
		switch want, have := desired.Addresses[a], observed.Addresses[a]; {
		case want && !have:
			ops = append(ops, Bind{Addr: a})
		case !want && have:
			ops = append(ops, Unbind{Addr: a})
		}
	}
	return ops
}

// servicePriority puts the services a node needs to reach its own control
// plane first, so a node joining a large cluster can talk to the API server
// through its service IP before the rest is programmed.
func servicePriority(n model.ServicePortName) int {
	switch {
	case n.Namespace == "default" && n.Name == "kubernetes":
		return 0
	case n.Namespace == "kube-system":
		return 1
	}
	return 2
}

// sortVirtual orders virtual servers by their service's priority, then
// its name, then the key. The sort keys are made once: a comparison that
// looked up and formatted both names cost most of a first sync's diff.
func sortVirtual(keys []VirtualKey, services map[VirtualKey]model.ServicePortName) {
	type sortKey struct {
		key      VirtualKey
		priority int
		name     string
	}
	sorted := make([]sortKey, len(keys))
	for i, k := range keys {
		n := services[k]
		sorted[i] = sortKey{k, servicePriority(n), n.String()}
	}
	slices.SortFunc(sorted, func(a, b sortKey) int {
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		if c := cmp.Compare(a.name, b.name); c != 0 {
			return c
		}
		return a.key.compare(b.key)
	})
	for i := range sorted {
		keys[i] = sorted[i].key
	}
}

func diffVirtual(observed, desired *KernelState, services map[VirtualKey]model.ServicePortName, scope Scope, drain Drain) []Op {
	// Only what differs is sorted and planned: a compare of a kernel that
	// holds what it should finds nothing, and costs little.
	var keys []VirtualKey
	if scope.All {
		for k, want := range desired.Virtual {
			if have, ok := observed.Virtual[k]; !ok || have != want || !sameReals(observed.Reals[k], desired.Reals[k]) {
				keys = append(keys, k)
			}
		}
		for k := range observed.Virtual {
			if _, ok := desired.Virtual[k]; !ok {
				keys = append(keys, k)
			}
		}
	} else {
		for k := range scope.Virtual {
			if virtualDiffers(observed, desired, k) {
				keys = append(keys, k)
			}
		}
	}
	sortVirtual(keys, services)
	// Most virtual servers planned take one or two operations: the
	// server and its real servers.
	ops := make([]Op, 0, 2*len(keys))
	for _, k := range keys {
		want, wanted := desired.Virtual[k]
		have, had := observed.Virtual[k]
		switch {
		case wanted && !had:
			ops = append(ops, AddVirtual{Service: services[k], Virtual: want})
		case !wanted && had:
			ops = append(ops, DeleteVirtual{Virtual: k})
			continue
		case !wanted && !had:
			continue
		case want != have:
			ops = append(ops, UpdateVirtual{Service: services[k], Virtual: want})
		}
		ops = appendRealsDiff(ops, k, observed.Reals[k], desired.Reals[k], drain)
	}
	return ops
}

// appendRealsDiff appends to ops the operations that add and reweight
// real servers, and remove those whose endpoint left as kube-proxy's
// GracefulDeleteRS does: a TCP one with no connection (active or
// inactive, in have's counts, which must be fresh) is deleted at once;
// one with connections goes to weight 0 and is deleted once they end or
// the drain times out; UDP and SCTP ones are deleted at once (their
// stale flows go in the sync's conntrack reconciliation, ReconcileFlows).
func appendRealsDiff(ops []Op, vs VirtualKey, have, want Reals, drain Drain) []Op {
	if len(have) == 0 {
		// All of them are new, as on a first sync: the desired list
		// itself.
		if len(want) == 0 {
			return ops
		}
		return append(ops, AddReals{Virtual: vs, Reals: want})
	}
	var add Reals
	var reweight []Op
	for _, w := range want {
		h, ok := have.Get(w.RealKey)
		switch {
		case !ok:
			add = append(add, w)
		case h.Weight != w.Weight:
			reweight = append(reweight, UpdateReal{Virtual: vs, Real: w})
		}
	}
	if len(add) > 0 {
		ops = append(ops, AddReals{Virtual: vs, Reals: add})
	}
	ops = append(ops, reweight...)
	for _, h := range have {
		rk := h.RealKey
		if _, ok := want.Get(rk); ok {
			continue
		}
		switch {
		case vs.Protocol != inet.TCP, h.ActiveConns == 0 && h.InactiveConns == 0:
			ops = append(ops, DeleteReal{Virtual: vs, Real: rk})
		case h.Weight != 0:
			ops = append(ops, UpdateReal{Virtual: vs, Real: RealServer{RealKey: rk}})
		case drainExpired(drain, vs, rk):
			ops = append(ops, DeleteReal{Virtual: vs, Real: rk})
		}
	}
	return ops
}

// LosesReals reports whether the diff of TCP virtual server vk removes
// real servers that still have a weight. How Diff removes them depends on
// their connection counts in observed, which the caller must read first:
// one with no connection is deleted, one with connections drains at
// weight 0. A virtual server that desired does not hold is deleted with
// its real servers whatever their connections, as kube-proxy deletes a
// removed service's, so it loses none this way.
func LosesReals(observed, desired *KernelState, vk VirtualKey) bool {
	if vk.Protocol != inet.TCP {
		return false
	}
	if _, stays := desired.Virtual[vk]; !stays {
		return false
	}
	want := desired.Reals[vk]
	for _, h := range observed.Reals[vk] {
		if _, ok := want.Get(h.RealKey); !ok && h.Weight != 0 {
			return true
		}
	}
	return false
}

// virtualDiffers reports whether virtual server k, or its real servers,
// differ between observed and desired.
func virtualDiffers(observed, desired *KernelState, k VirtualKey) bool {
	want, wanted := desired.Virtual[k]
	have, had := observed.Virtual[k]
	if !wanted || !had {
		return wanted != had
	}
	return have != want || !sameReals(observed.Reals[k], desired.Reals[k])
}

// sameReals reports whether appendRealsDiff has nothing to do: both sorted
// lists hold the same real servers at the same weights.
func sameReals(have, want Reals) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		if have[i].RealKey != want[i].RealKey || have[i].Weight != want[i].Weight {
			return false
		}
	}
	return true
}

func drainExpired(d Drain, vs VirtualKey, rk RealKey) bool {
	since, ok := d.Since[vs][rk]
	timeout := d.Timeout
	if t, ok := d.Timeouts[vs]; ok {
		timeout = t
	}
	return ok && timeout > 0 && d.Now.Sub(since) >= timeout
}
