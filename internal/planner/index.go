package planner

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// desiredIndex keeps the desired kernel state as the sum of every service
// port's contribution, so that a change to one service updates it, and
// names the objects to re-plan, in time proportional to that service alone.
// Addresses and set entries may be shared (a cluster IP with two ports),
// so they are reference-counted: the state holds the first reference,
// and extraAddrs and extraEntries count the others. Most have one, and a
// count for each would cost a map entry for every one of them.
type desiredIndex struct {
	node   model.Node
	state  *KernelState
	owners map[VirtualKey]model.ServicePortName
	// contenders holds, for a virtual server that several service ports
	// claim, those that do not have it; one takes it over when the owner
	// goes.
	contenders   map[VirtualKey][]model.ServicePortName
	contribs     map[model.ServicePortName]*contribution
	extraAddrs   map[netip.Addr]int
	extraEntries map[setEntry]int
	// facts are what the planner learned of the kernel, shared with it.
	facts *kernelFacts
	// externalClaims counts, per virtual server, the service ports that
	// name it as an external IP or load-balancer address: whether another
	// program made it decides what they get (see Planner.SetForeign).
	externalClaims map[VirtualKey]int
	// troubled holds the service ports with problems that do not leave
	// them out, so reporting them costs what they number.
	troubled map[model.ServicePortName]bool
	// conflictsReported is conflicts' answer, kept while conflictsKnown,
	// until a claim on a contended virtual server changes: a tenant's
	// thousands of colliding claims are not sorted again at every sync.
	conflictsReported []error
	conflictsKnown    bool
	// reported is problems' answer, kept until a troubled port changes:
	// every sync reports them, and sorting them at each was a sync's
	// cost proportional to what every tenant wrote, not to what changed.
	reported []error
	// drains holds the drain bounds of the virtual servers whose owner
	// overrides the node's.
	drains map[VirtualKey]time.Duration
	// claimedByAnyone holds the virtual servers whose owner claims them
	// through an address anyone who may create a Service writes (an
	// external IP or a load-balancer address): in a model still partly
	// listed, a cluster IP or node port to come may beat the claim.
	claimedByAnyone map[VirtualKey]bool
	// scratch is where contributions are built.
	scratch contributionScratch
}

func newDesiredIndex(node model.Node, rules string, facts *kernelFacts) *desiredIndex {
	state := NewKernelState()
	state.Sets = SetSpecs()
	if node.IPv4Only {
		maps.DeleteFunc(state.Sets, func(_ string, s SetSpec) bool { return s.Family == inet.IPv6 })
	}
	state.Rules = rules
	for name := range state.Sets {
		state.Entries[name] = map[Entry]bool{}
	}
	return &desiredIndex{
		node:         node,
		state:        state,
		owners:       map[VirtualKey]model.ServicePortName{},
		contenders:   map[VirtualKey][]model.ServicePortName{},
		contribs:     map[model.ServicePortName]*contribution{},
		extraAddrs:   map[netip.Addr]int{},
		extraEntries: map[setEntry]int{},
		facts:        facts,

		externalClaims: map[VirtualKey]int{},
		troubled:       map[model.ServicePortName]bool{},
		drains:         map[VirtualKey]time.Duration{},

		claimedByAnyone: map[VirtualKey]bool{},
	}
}

// reserve makes an empty index's maps large enough for contribs (nil
// ones are skipped): a map made at its size is never rehashed as it
// fills.
func (d *desiredIndex) reserve(contribs []*contribution) {
	var virtual, addrs int
	entries := map[string]int{}
	for _, c := range contribs {
		if c == nil {
			continue
		}
		virtual += len(c.virtual)
		addrs += len(c.addrs)
		for _, e := range c.entries {
			entries[e.Set]++
		}
		for _, e := range c.claimed {
			entries[e.Set]++
		}
	}
	d.owners = make(map[VirtualKey]model.ServicePortName, virtual)
	d.contribs = make(map[model.ServicePortName]*contribution, len(contribs))
	d.state.Virtual = make(map[VirtualKey]VirtualServer, virtual)
	d.state.Reals = make(map[VirtualKey]Reals, virtual)
	d.state.Addresses = make(map[netip.Addr]bool, addrs)
	for set, n := range entries {
		if _, ok := d.state.Entries[set]; ok {
			d.state.Entries[set] = make(map[Entry]bool, n)
		}
	}
}

// NewScope returns an empty scope, to add objects to.
func NewScope() *Scope {
	return &Scope{
		Virtual:   map[VirtualKey]bool{},
		Addresses: map[netip.Addr]bool{},
		Entries:   map[string]map[Entry]bool{},
	}
}

// Merge adds the objects of another scope; a scope of everything makes
// this one everything.
func (t *Scope) Merge(s Scope) {
	if s.All {
		t.All = true
		return
	}
	t.Global = t.Global || s.Global
	for k := range s.Virtual {
		t.Virtual[k] = true
	}
	for a := range s.Addresses {
		t.Addresses[a] = true
	}
	for set, entries := range s.Entries {
		t.addEntries(set, slices.Collect(maps.Keys(entries)))
	}
}

// Touch adds the objects an operation changes; an operation on the sets
// themselves or the rules makes the scope everything.
func (t *Scope) Touch(op Op) {
	switch o := op.(type) {
	case CreateSet, ReplaceRules, RemoveKubeProxyRules:
		t.All = true
	case AddEntries:
		t.addEntries(o.Set, o.Entries)
	case DelEntries:
		t.addEntries(o.Set, o.Entries)
	case AddVirtual:
		t.Virtual[o.Virtual.VirtualKey] = true
	case UpdateVirtual:
		t.Virtual[o.Virtual.VirtualKey] = true
	case DeleteVirtual:
		t.Virtual[o.Virtual] = true
	case Bind:
		t.Addresses[o.Addr] = true
	case Unbind:
		t.Addresses[o.Addr] = true
	case AddReals, UpdateReal, DeleteReal:
		// Their virtual server, below.
	case ReconcileFlows:
		// Conntrack is no object of a scope.
	default:
		// A kind of operation added without its objects (everyop's test).
		panic(fmt.Sprintf("planner: no objects of %T", op))
	}
	if vk, ok := realsTarget(op); ok {
		t.Virtual[vk] = true
	}
}

// addEntries adds entries of a set.
func (t *Scope) addEntries(set string, entries []Entry) {
	for _, e := range entries {
		t.addEntry(set, e)
	}
}

func (t *Scope) addEntry(set string, e Entry) {
	if t.Entries[set] == nil {
		t.Entries[set] = map[Entry]bool{}
	}
	t.Entries[set][e] = true
}

// add records what a contribution touches; a nil t records nothing.
func (t *Scope) add(c *contribution) {
	if t == nil {
		return
	}
	for _, v := range c.virtual {
		t.Virtual[v.VirtualKey] = true
	}
	for _, a := range c.addrs {
		t.Addresses[a] = true
	}
	for _, e := range c.entries {
		t.addEntry(e.Set, e.Entry)
	}
	for _, e := range c.claimed {
		t.addEntry(e.Set, e.Entry)
	}
}

// put validates a service port and replaces its contribution with the
// one computed from s; an invalid port keeps nothing programmed, and its
// error is returned. A virtual server that another service port claims
// too goes to the better claim (see better), whatever the order they came
// in; the rest of both is programmed, and conflicts reports it.
func (d *desiredIndex) put(s *model.ServicePort, t *Scope) error {
	if err := s.Validate(); err != nil {
		d.remove(s.Name, t)
		return err
	}
	next := d.scratch.contributionOf(&d.node, s, d.facts)
	d.remove(s.Name, t)
	t.add(next)
	d.addContribution(s.Name, next, t)
	if len(next.problems) > 0 {
		d.reported = nil
	}
	return nil
}

// remove takes the service port's contribution away, if it has one.
func (d *desiredIndex) remove(name model.ServicePortName, t *Scope) {
	if prev := d.contribs[name]; prev != nil {
		if len(prev.problems) > 0 {
			d.reported = nil
		}
		t.add(prev)
		d.subtract(name, prev, t)
	}
}

// addContribution adds c, the service port's contribution; a claim of
// another port that c's takes over loses its set entries, and t (if not
// nil) records them.
func (d *desiredIndex) addContribution(name model.ServicePortName, c *contribution, t *Scope) {
	d.contribs[name] = c
	if len(c.problems) > 0 {
		d.troubled[name] = true
	}
	for _, vk := range c.externalKeys {
		d.externalClaims[vk]++
	}
	for i, v := range c.virtual {
		owner, taken := d.owners[v.VirtualKey]
		switch {
		case !taken:
			d.own(name, c, i, t)
		case owner == name:
			// The port names one virtual server twice; the first stands.
		case d.better(name, c.kinds[i], owner, v.VirtualKey):
			d.contenders[v.VirtualKey] = append(d.contenders[v.VirtualKey], owner)
			d.conflictsKnown = false
			oc := d.contribs[owner]
			d.releaseClaimed(oc, claimIndex(oc, v.VirtualKey), t)
			d.own(name, c, i, t)
		default:
			d.contenders[v.VirtualKey] = append(d.contenders[v.VirtualKey], name)
			d.conflictsKnown = false
		}
	}
	for _, a := range c.addrs {
		if d.state.Addresses[a] {
			d.extraAddrs[a]++
		} else {
			d.state.Addresses[a] = true
		}
	}
	for _, e := range c.entries {
		d.addEntry(e)
	}
}

// addEntry adds a reference to set entry e.
func (d *desiredIndex) addEntry(e setEntry) {
	if d.state.Entries[e.Set][e.Entry] {
		d.extraEntries[e]++
	} else {
		d.state.Entries[e.Set][e.Entry] = true
	}
}

// releaseEntry drops a reference to set entry e; the last takes it out.
func (d *desiredIndex) releaseEntry(e setEntry) {
	if !release(d.extraEntries, e) {
		delete(d.state.Entries[e.Set], e.Entry)
	}
}

// releaseClaimed drops the set entries of c's claim i, which it no
// longer owns, and t (if not nil) records them.
func (d *desiredIndex) releaseClaimed(c *contribution, i int, t *Scope) {
	for _, e := range c.claimedEntries(i) {
		d.releaseEntry(e.setEntry)
		if t != nil {
			t.addEntry(e.Set, e.Entry)
		}
	}
}

// claimIndex returns where c claims virtual server vk.
func claimIndex(c *contribution, vk VirtualKey) int {
	return slices.IndexFunc(c.virtual, func(v VirtualServer) bool { return v.VirtualKey == vk })
}

// own gives c's virtual server i to the service port, with the set
// entries of the claim; t (if not nil) records them. A health-check
// node port's claim keeps the others out and is no virtual server.
func (d *desiredIndex) own(name model.ServicePortName, c *contribution, i int, t *Scope) {
	vk := c.virtual[i].VirtualKey
	d.owners[vk] = name
	for _, e := range c.claimedEntries(i) {
		d.addEntry(e.setEntry)
		if t != nil {
			t.addEntry(e.Set, e.Entry)
		}
	}
	if c.kinds[i] == kindHealthCheck {
		delete(d.state.Virtual, vk)
		delete(d.state.Reals, vk)
		delete(d.drains, vk)
		delete(d.claimedByAnyone, vk)
		return
	}
	d.state.Virtual[vk] = c.virtual[i]
	// Shared with the contribution: a Reals is never changed.
	d.state.Reals[vk] = c.reals[i]
	if c.drain > 0 {
		d.drains[vk] = c.drain
	} else {
		delete(d.drains, vk)
	}
	if c.kinds[i] >= kindLoadBalancer {
		d.claimedByAnyone[vk] = true
	} else {
		delete(d.claimedByAnyone, vk)
	}
}

// better reports whether service port a's claim on virtual server vk, of
// kind `kind`, beats b's: the kind first (a cluster IP before a node port,
// a health-check node port on a node address, a load-balancer address and
// an external IP, in that order), then the
// API server's own service, then the name. kube-proxy has no rule: both
// program the one virtual server and the last sync decides its real
// servers.
func (d *desiredIndex) better(a model.ServicePortName, kind virtualKind, b model.ServicePortName, vk VirtualKey) bool {
	if bk := d.kindOf(b, vk); kind != bk {
		return kind < bk
	}
	if pa, pb := servicePriority(a), servicePriority(b); pa != pb {
		return pa < pb
	}
	return compareNames(a, b) < 0
}

// kindOf returns what made service port name claim vk.
func (d *desiredIndex) kindOf(name model.ServicePortName, vk VirtualKey) virtualKind {
	c := d.contribs[name]
	return c.kinds[claimIndex(c, vk)]
}

// conflicts reports every claim that lost, in name order.
func (d *desiredIndex) conflicts() []error {
	if !d.conflictsKnown {
		d.conflictsReported, d.conflictsKnown = d.sortedConflicts(), true
	}
	return d.conflictsReported
}

// sortedConflicts lists every claim that lost, in name order.
func (d *desiredIndex) sortedConflicts() []error {
	var errs []*ConflictError
	for vk, names := range d.contenders {
		for _, name := range names {
			errs = append(errs, &ConflictError{Service: name, Virtual: vk, Owner: d.owners[vk]})
		}
	}
	slices.SortFunc(errs, func(a, b *ConflictError) int {
		if c := compareNames(a.Service, b.Service); c != 0 {
			return c
		}
		return cmp.Compare(a.Virtual.String(), b.Virtual.String())
	})
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

// problems reports, in name order, what the service ports asked for and
// do not get, though they are programmed. The caller must not change
// the list.
func (d *desiredIndex) problems() []error {
	if d.reported != nil || len(d.troubled) == 0 {
		return d.reported
	}
	for _, name := range slices.SortedFunc(maps.Keys(d.troubled), compareNames) {
		d.reported = append(d.reported, d.contribs[name].problems...)
	}
	return d.reported
}

// subtract takes c, the service port's contribution, out of the index; a
// claim that lost one of its virtual servers to the port takes it over,
// and t (if not nil) records it.
func (d *desiredIndex) subtract(name model.ServicePortName, c *contribution, t *Scope) {
	delete(d.contribs, name)
	delete(d.troubled, name)
	for _, vk := range c.externalKeys {
		release(d.externalClaims, vk)
	}
	for i, v := range c.virtual {
		vk := v.VirtualKey
		if d.owners[vk] != name {
			d.dropContender(vk, name)
			continue
		}
		d.releaseClaimed(c, i, nil)
		delete(d.owners, vk)
		delete(d.state.Virtual, vk)
		delete(d.state.Reals, vk)
		delete(d.drains, vk)
		delete(d.claimedByAnyone, vk)
		if next, ok := d.bestContender(vk); ok {
			d.dropContender(vk, next)
			nc := d.contribs[next]
			d.own(next, nc, claimIndex(nc, vk), t)
			if t != nil {
				t.Virtual[vk] = true
			}
		}
	}
	for _, a := range c.addrs {
		if !release(d.extraAddrs, a) {
			delete(d.state.Addresses, a)
		}
	}
	for _, e := range c.entries {
		d.releaseEntry(e)
	}
}

// bestContender returns the best of the claims on vk that lost.
func (d *desiredIndex) bestContender(vk VirtualKey) (model.ServicePortName, bool) {
	names := d.contenders[vk]
	if len(names) == 0 {
		return model.ServicePortName{}, false
	}
	best := names[0]
	for _, n := range names[1:] {
		if d.better(n, d.kindOf(n, vk), best, vk) {
			best = n
		}
	}
	return best, true
}

func (d *desiredIndex) dropContender(vk VirtualKey, name model.ServicePortName) {
	d.conflictsKnown = false
	names := slices.DeleteFunc(d.contenders[vk], func(n model.ServicePortName) bool { return n == name })
	if len(names) == 0 {
		delete(d.contenders, vk)
	} else {
		d.contenders[vk] = names
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
