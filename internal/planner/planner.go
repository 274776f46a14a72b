package planner

import (
	"cmp"
	"hash/maphash"
	"maps"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// Planner holds the desired kernel state between syncs and works out which
// objects each new model touches, so that a sync after a change to one
// service plans (and costs) that service alone. It does no kernel access.
type Planner struct {
	index *desiredIndex
	seed  maphash.Seed
	// seen holds the fingerprint of every service port in the index.
	seen map[model.ServicePortName]uint64
	// retry holds copies of the ports left out, to try again.
	retry map[model.ServicePortName]*model.ServicePort
	// failed holds the service ports left out last time; they are tried
	// again on every update, since a conflict may have gone away.
	failed map[model.ServicePortName]error
	// facts are what the planner learned of the kernel.
	facts *kernelFacts
	// stale says the facts changed in a way that the next Update must
	// rebuild for.
	stale bool
	rules Rules
	// flows is what conntrack reconciliation needs of the service ports,
	// and the reconciliations due.
	flows *flowIndex
}

// NewPlanner returns a planner with an empty desired state, whose rules
// rules renders.
func NewPlanner(rules Rules) *Planner {
	seed := maphash.MakeSeed()
	return &Planner{seed: seed, facts: &kernelFacts{lacking: map[string]error{}}, rules: rules, flows: newFlowIndex()}
}

// Node returns the node's settings of the last Update, nil before the
// first. The caller must not change them.
func (p *Planner) Node() *model.Node {
	if p.index == nil {
		return nil
	}
	return &p.index.node
}

// LackScheduler tells the planner that the kernel does not have an IPVS
// scheduler (err says why): service ports that name it get the node's.
// It applies to the ports updated from now on, so it must come before
// the update that brings the first port naming it.
func (p *Planner) LackScheduler(name string, err error) { p.facts.lacking[name] = err }

// SetForeign tells the planner which virtual servers of the kernel
// another program made: keepalived, kube-vip, an operator's ipvsadm. A
// service port's external IP or load-balancer address does not take one
// (a *model.SettingError says so), where a cluster IP or node port
// adopts it as kube-proxy's own are adopted. It returns whether that
// changes what a port already planned gets: then the next Update builds
// everything again, and UpdateChanges applies the virtual servers to the
// ports it puts. The planner keeps foreign; the caller must not change
// it.
func (p *Planner) SetForeign(foreign map[VirtualKey]bool) bool {
	old := p.facts.foreign
	p.facts.foreign = foreign
	if p.index == nil {
		return false
	}
	matters := func(vk VirtualKey) bool { return p.index.externalClaims[vk] > 0 }
	for vk := range foreign {
		if !old[vk] && matters(vk) {
			p.stale = true
		}
	}
	for vk := range old {
		if !foreign[vk] && matters(vk) {
			p.stale = true
		}
	}
	return p.stale
}

// DrainTimeouts returns the drain bounds of the virtual servers whose
// service port overrides the node's. The caller must not change them.
func (p *Planner) DrainTimeouts() map[VirtualKey]time.Duration { return p.index.drains }

// ClaimedByAnyone returns the virtual servers whose service port claims
// them through an external IP or a load-balancer address, which anyone who
// may create a Service can write: while the model is partial (a start
// still listing), a cluster IP or node port yet to come may own them, so
// a Prefill leaves them to the first full sync. The caller must not
// change the map.
func (p *Planner) ClaimedByAnyone() map[VirtualKey]bool { return p.index.claimedByAnyone }

// Update takes the whole model and returns the scope of kernel objects
// that changed since the last update (everything on the first update or
// when the node's settings changed), and the service ports left out. It
// compares every service port with its last version; a caller that tracks
// changes itself can use UpdateChanges instead.
func (p *Planner) Update(s *model.State) (Scope, []error) {
	if p.index == nil || p.stale || !equalNode(&p.index.node, &s.Node) {
		return p.rebuild(s)
	}
	var changes []model.Change
	present := make(map[model.ServicePortName]bool, len(s.Services))
	for i := range s.Services {
		sp := &s.Services[i]
		present[sp.Name] = true
		if fp, ok := p.seen[sp.Name]; !ok || fp != hashPort(p.seed, sp).fingerprint {
			changes = append(changes, model.Change{Name: sp.Name, Port: sp})
		}
	}
	for name := range p.seen {
		if !present[name] {
			changes = append(changes, model.Change{Name: name})
		}
	}
	return p.UpdateChanges(changes)
}

// UpdateChanges applies changes to service ports that the caller tracked,
// in time proportional to the changes whatever the number of service
// ports. Of several changes to one port, the last counts. The node's settings stay those of the last Update; before any
// Update they are the zero Node.
func (p *Planner) UpdateChanges(changes []model.Change) (Scope, []error) {
	if p.index == nil {
		p.rebuild(&model.State{})
	}
	changes = lastOfEachName(changes)
	// Each changed port is hashed once: its fingerprint is kept for a
	// later Update, its endpoints' hashes decide conntrack reconciliation.
	hashes := make([]portHashes, len(changes))
	for i, c := range changes {
		if c.Port != nil {
			hashes[i] = hashPort(p.seed, c.Port)
			p.seen[c.Name] = hashes[i].fingerprint
		}
	}
	p.flows.update(changes, hashes)
	// Ports left out before are tried again: a conflict may have gone.
	changed := make(map[model.ServicePortName]bool, len(changes))
	for _, c := range changes {
		changed[c.Name] = true
	}
	for name := range p.failed {
		if !changed[name] {
			changes = append(changes, model.Change{Name: name, Port: p.retry[name]})
		}
	}
	// Removals first, so a port that takes over a removed port's virtual
	// server in the same update does not conflict with it; then in the
	// order of a full build.
	slices.SortFunc(changes, func(a, b model.Change) int {
		if (a.Port == nil) != (b.Port == nil) {
			if a.Port == nil {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(servicePriority(a.Name), servicePriority(b.Name)); c != 0 {
			return c
		}
		return compareNames(a.Name, b.Name)
	})
	t := NewScope()
	for _, c := range changes {
		delete(p.failed, c.Name)
		if c.Port == nil {
			p.index.remove(c.Name, t)
			delete(p.seen, c.Name)
			delete(p.retry, c.Name)
			continue
		}
		// A port tried again keeps the fingerprint it was left out with.
		if err := p.index.put(c.Port, t); err != nil {
			p.failed[c.Name] = err
			if p.retry[c.Name] != c.Port {
				p.retry[c.Name] = cloneServicePort(c.Port)
			}
		} else {
			delete(p.retry, c.Name)
		}
	}
	return *t, p.errors()
}

// lastOfEachName returns changes without those a later change of the
// same port replaces, in a new slice: the caller's is left as it is.
func lastOfEachName(changes []model.Change) []model.Change {
	last := make(map[model.ServicePortName]int, len(changes))
	for i, c := range changes {
		last[c.Name] = i
	}
	out := make([]model.Change, 0, len(last))
	for i, c := range changes {
		if last[c.Name] == i {
			out = append(out, c)
		}
	}
	return out
}

// rebuild computes the desired state of a whole model afresh.
func (p *Planner) rebuild(s *model.State) (Scope, []error) {
	index, failed, err := buildIndex(s, p.rules, p.facts)
	p.index, p.failed, p.stale = index, failed, false
	p.seen, p.retry = make(map[model.ServicePortName]uint64, len(s.Services)), map[model.ServicePortName]*model.ServicePort{}
	hashes := make([]portHashes, len(s.Services))
	for i := range s.Services {
		sp := &s.Services[i]
		hashes[i] = hashPort(p.seed, sp)
		p.seen[sp.Name] = hashes[i].fingerprint
		if _, ok := failed[sp.Name]; ok {
			p.retry[sp.Name] = cloneServicePort(sp)
		}
	}
	p.flows.replace(s.Services, hashes)
	if err != nil {
		return FullScope, []error{err}
	}
	return FullScope, p.errors()
}

// errors returns the service ports left out, in name order, then the
// claims that lost a virtual server to another port, then the problems
// of ports programmed all the same.
func (p *Planner) errors() []error {
	var errs []error
	for _, name := range slices.SortedFunc(maps.Keys(p.failed), compareNames) {
		errs = append(errs, p.failed[name])
	}
	return append(append(errs, p.index.conflicts()...), p.index.problems()...)
}

// Reconciles returns the conntrack reconciliations due (see
// ReconcileFlows): made due by the updates since each last ran, the first
// update's among them, and left due until Reconciled says one ran.
func (p *Planner) Reconciles() []ReconcileFlows {
	return p.flows.dueNow(p.index != nil && p.index.node.IPv4Only)
}

// Reconciled tells the planner that a reconciliation ran to the end: it
// is not due again until another update makes it so.
func (p *Planner) Reconciled(op ReconcileFlows) { delete(p.flows.due, op) }

// FlowMatcher returns the policy of a reconciliation over the service
// ports of the last update, the ports left out among them (kube-proxy
// reconciles every Service it reads).
func (p *Planner) FlowMatcher(op ReconcileFlows) *FlowMatcher { return p.flows.matcher(op) }

// Claims returns the virtual servers service port name claims in the
// desired state, read from its contribution in the index: those it owns
// and those another port has (a ConflictError), not a health-check node
// port, which is no virtual server. A port left out, or unknown, has
// none. The slice is the caller's.
func (p *Planner) Claims(name model.ServicePortName) []VirtualKey {
	if p.index == nil {
		return nil
	}
	return p.index.contribs[name].virtualKeys()
}

// Desired returns the desired kernel state and the service each virtual
// server belongs to. The caller must not change them.
func (p *Planner) Desired() (*KernelState, map[VirtualKey]model.ServicePortName) {
	return p.index.state, p.index.owners
}

func compareNames(a, b model.ServicePortName) int { return cmp.Compare(a.String(), b.String()) }
