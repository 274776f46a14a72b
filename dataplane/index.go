package dataplane

import (
	"maps"
	"net/netip"
	"slices"
)

// desiredIndex keeps the desired kernel state as the sum of every service
// port's contribution, so that a change to one service updates it, and
// names the objects to re-plan, in time proportional to that service alone.
// Addresses and set entries may be shared (a cluster IP with two ports),
// so they are reference-counted: the state holds the first reference,
// and extraAddrs and extraEntries count the others. Most have one, and a
// count for each would cost a map entry for every one of them.
type desiredIndex struct {
	node         Node
	state        *KernelState
	owners       map[VirtualKey]ServicePortName
	contribs     map[ServicePortName]*contribution
	extraAddrs   map[netip.Addr]int
	extraEntries map[SetEntry]int
}

func newDesiredIndex(node Node, rules string) *desiredIndex {
	state := NewKernelState()
	state.Sets = setSpecs()
	state.Rules = rules
	for name := range state.Sets {
		state.Entries[name] = map[string]bool{}
	}
	return &desiredIndex{
		node:         node,
		state:        state,
		owners:       map[VirtualKey]ServicePortName{},
		contribs:     map[ServicePortName]*contribution{},
		extraAddrs:   map[netip.Addr]int{},
		extraEntries: map[SetEntry]int{},
	}
}

// touched accumulates the objects a set of changes affected; all means
// everything.
type touched struct {
	scope Scope
	all   bool
}

// merge adds the objects of another scope.
func (t *touched) merge(s Scope) {
	if s.All {
		t.all = true
		return
	}
	for k := range s.Virtual {
		t.scope.Virtual[k] = true
	}
	for a := range s.Addresses {
		t.scope.Addresses[a] = true
	}
	for set, entries := range s.Entries {
		t.addEntries(set, slices.Collect(maps.Keys(entries)))
	}
}

func (t *touched) addEntries(set string, entries []string) {
	if t.scope.Entries[set] == nil {
		t.scope.Entries[set] = map[string]bool{}
	}
	for _, e := range entries {
		t.scope.Entries[set][e] = true
	}
}

func newTouched() *touched {
	return &touched{scope: Scope{
		Virtual:   map[VirtualKey]bool{},
		Addresses: map[netip.Addr]bool{},
		Entries:   map[string]map[string]bool{},
	}}
}

func (t *touched) add(c *contribution) {
	for _, v := range c.virtual {
		t.scope.Virtual[v.VirtualKey] = true
	}
	for _, a := range c.addrs {
		t.scope.Addresses[a] = true
	}
	for _, e := range c.entries {
		if t.scope.Entries[e.Set] == nil {
			t.scope.Entries[e.Set] = map[string]bool{}
		}
		t.scope.Entries[e.Set][e.Entry] = true
	}
}

// put replaces the service port's contribution with the one computed from
// s, which must be valid. A service port whose virtual server another one
// already has is rejected whole and keeps nothing programmed.
func (d *desiredIndex) put(s *ServicePort, t *touched) error {
	next := d.node.contribution(s)
	for _, v := range next.virtual {
		if owner, ok := d.owners[v.VirtualKey]; ok && owner != s.Name {
			d.remove(s.Name, t)
			return &ConflictError{Service: s.Name, Virtual: v.VirtualKey, Owner: owner}
		}
	}
	d.remove(s.Name, t)
	t.add(next)
	d.addContribution(s.Name, next)
	return nil
}

// remove takes the service port's contribution away, if it has one.
func (d *desiredIndex) remove(name ServicePortName, t *touched) {
	if prev := d.contribs[name]; prev != nil {
		t.add(prev)
		d.subtract(name, prev)
	}
}

func (d *desiredIndex) addContribution(name ServicePortName, c *contribution) {
	d.contribs[name] = c
	for i, v := range c.virtual {
		d.owners[v.VirtualKey] = name
		d.state.Virtual[v.VirtualKey] = v
		// Shared with the contribution: a Reals is never changed.
		d.state.Reals[v.VirtualKey] = c.reals[i]
	}
	for _, a := range c.addrs {
		if d.state.Addresses[a] {
			d.extraAddrs[a]++
		} else {
			d.state.Addresses[a] = true
		}
	}
	for _, e := range c.entries {
		if d.state.Entries[e.Set][e.Entry] {
			d.extraEntries[e]++
		} else {
			d.state.Entries[e.Set][e.Entry] = true
		}
	}
}

func (d *desiredIndex) subtract(name ServicePortName, c *contribution) {
	delete(d.contribs, name)
	for _, v := range c.virtual {
		delete(d.owners, v.VirtualKey)
		delete(d.state.Virtual, v.VirtualKey)
		delete(d.state.Reals, v.VirtualKey)
	}
	for _, a := range c.addrs {
		if !release(d.extraAddrs, a) {
			delete(d.state.Addresses, a)
		}
	}
	for _, e := range c.entries {
		if !release(d.extraEntries, e) {
			delete(d.state.Entries[e.Set], e.Entry)
		}
	}
}

// release drops one of k's extra references and reports whether there
// was one; without, the last reference is going.
func release[K comparable](extra map[K]int, k K) bool {
	n, ok := extra[k]
	switch {
	case !ok:
		return false
	case n == 1:
		delete(extra, k)
	default:
		extra[k] = n - 1
	}
	return true
}
