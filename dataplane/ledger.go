package dataplane

import (
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// ledger remembers what the dataplane programmed and what it still owes
// the kernel, so that a sync plans only what changed: the kernel state as
// far as the dataplane knows, the objects whose operations failed, the
// real servers still draining and the virtual IPs still bound the other
// way; and, from the last full read, the virtual servers that are another
// program's. Every outcome of an operation is entered here (succeeded,
// failed).
type ledger struct {
	// state is what the kernel holds, as far as the dataplane knows; nil
	// until the first sync reads the kernel.
	state *plan.KernelState
	// retry holds the objects whose operations failed, planned again on
	// the next sync.
	retry    *planner.Scope
	draining draining
	// drainingRead is when the draining real servers were last read (see
	// drainingReadEvery).
	drainingRead time.Time
	// leftovers are virtual IPs bound the other way than Config.Binding
	// says, found by the last full read and not yet unbound.
	leftovers []netip.Addr
	// foreign are the virtual servers another program made, as the last
	// full read found them (see kernelRead.foreign).
	foreign map[plan.VirtualKey]bool
	// now is the clock (Config.Now).
	now func() time.Time
}

// newLedger returns the ledger of a dataplane that has read nothing yet.
func newLedger(now func() time.Time) *ledger {
	return &ledger{retry: planner.NewScope(), draining: draining{}, now: now}
}

// succeeded records carried-out operations.
func (l *ledger) succeeded(ops ...plan.Op) {
	l.state.Record(ops...)
	now := l.now()
	for _, op := range ops {
		l.draining.track(op, now)
	}
}

// failed remembers what a failed operation touched, to plan it again.
func (l *ledger) failed(op plan.Op, err error) error {
	l.retry.Touch(op)
	return &OpError{Op: op, Err: err}
}

// isProgrammed reports whether virtual server vk is in the kernel.
func (l *ledger) isProgrammed(vk plan.VirtualKey) bool {
	_, ok := l.state.Virtual[vk]
	return ok
}

// setOf returns set name as the dataplane made or found it, or else as it
// wants it: its entries are changed by that type and family, without a
// request asking the kernel for them first.
func (l *ledger) setOf(name string, desired *plan.KernelState) ipset.Set {
	spec, ok := l.state.Sets[name]
	if !ok {
		spec = desired.Sets[name]
	}
	spec.Name = name
	return ipsetSet(spec)
}

// takeRetry returns what failed since it was last taken, and forgets it:
// the caller plans it again.
func (l *ledger) takeRetry() planner.Scope {
	scope := *l.retry
	if l.retry.All {
		scope = planner.FullScope
	}
	l.retry = planner.NewScope()
	return scope
}

// diff plans what scope covers against the programmed state, and the
// conntrack reconciliations due, which come last.
func (l *ledger) diff(t target, scope planner.Scope, drainTimeout time.Duration) *plan.Plan {
	p := planner.Diff(planner.DiffInputs{Observed: l.state, Desired: t.kernel, Services: t.owners, Scope: scope, Drain: l.drain(drainTimeout, t.planner.DrainTimeouts())})
	p.Append(reconcilePlan(t.planner.Reconciles()))
	return p
}
