package dataplane

import (
	"cmp"
	"maps"
	"slices"
)

// Planner holds the desired kernel state between syncs and works out which
// objects each new model touches, so that a sync after a change to one
// service plans (and costs) that service alone. It does no kernel access.
type Planner struct {
	index *desiredIndex
	seen  map[ServicePortName]*ServicePort
	// failed holds the service ports left out last time; they are tried
	// again on every update, since a conflict may have gone away.
	failed map[ServicePortName]error
}

// NewPlanner returns a planner with an empty desired state.
func NewPlanner() *Planner { return &Planner{} }

// Update takes the whole model and returns the scope of kernel objects
// that changed since the last update (everything on the first update or
// when the node's settings changed), and the service ports left out.
func (p *Planner) Update(s *State) (Scope, []error) {
	if p.index == nil || !equalNode(&p.index.node, &s.Node) {
		index, failed, err := buildIndex(s)
		p.index, p.failed, p.seen = index, failed, map[ServicePortName]*ServicePort{}
		for _, sp := range sortedServices(s.Services) {
			p.seen[sp.Name] = sp
		}
		if err != nil {
			return FullScope, []error{err}
		}
		return FullScope, p.errors()
	}
	t := newTouched()
	current := make(map[ServicePortName]*ServicePort, len(s.Services))
	var changed []*ServicePort
	for _, sp := range sortedServices(s.Services) {
		current[sp.Name] = sp
		prev, ok := p.seen[sp.Name]
		_, failed := p.failed[sp.Name]
		if !ok || failed || !equalServicePort(prev, sp) {
			changed = append(changed, sp)
		}
	}
	// Removals first, so a port that takes over a removed port's virtual
	// server in the same update does not conflict with it.
	for _, name := range slices.SortedFunc(maps.Keys(p.seen), compareNames) {
		if _, ok := current[name]; !ok {
			p.index.remove(name, t)
			delete(p.failed, name)
		}
	}
	for _, sp := range changed {
		delete(p.failed, sp.Name)
		if err := put(p.index, sp, t); err != nil {
			p.failed[sp.Name] = err
		}
	}
	p.seen = current
	return t.scope, p.errors()
}

// errors returns the service ports left out, in name order.
func (p *Planner) errors() []error {
	var errs []error
	for _, name := range slices.SortedFunc(maps.Keys(p.failed), compareNames) {
		errs = append(errs, p.failed[name])
	}
	return errs
}

// Desired returns the desired kernel state and the service each virtual
// server belongs to. The caller must not change them.
func (p *Planner) Desired() (*KernelState, map[VirtualKey]ServicePortName) {
	return p.index.state, p.index.owners
}

func compareNames(a, b ServicePortName) int { return cmp.Compare(a.String(), b.String()) }
