package dataplane

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// draining remembers since when each real server that drains (at weight
// 0, with connections) has drained, by virtual server.
type draining map[plan.VirtualKey]map[plan.RealKey]time.Time

// drainingReadEvery is how often at most the syncs read the connection
// counts of the real servers that drain, one dump per virtual server:
// under churn a sync may follow every change, and a dump of each draining
// virtual server's real servers in each would cost them more than the
// changes (a dump of 50 real servers cost 3.5 times a change's own write
// at 5,000 services x 50 endpoints). A real server whose connections
// ended goes within a second and the next sync; kube-proxy's graceful
// termination looks once a minute.
const drainingReadEvery = time.Second

// track notes, from a carried-out operation, when real servers start and
// stop draining.
func (dr draining) track(op plan.Op, now time.Time) {
	switch o := op.(type) {
	case plan.UpdateReal:
		if o.Real.Weight == 0 {
			if dr[o.Virtual] == nil {
				dr[o.Virtual] = map[plan.RealKey]time.Time{}
			}
			dr[o.Virtual][o.Real.RealKey] = now
		} else {
			dr.stop(o.Virtual, o.Real.RealKey)
		}
	case plan.DeleteReal:
		dr.stop(o.Virtual, o.Real)
	case plan.DeleteVirtual:
		delete(dr, o.Virtual)
	case plan.CreateSet, plan.AddEntries, plan.DelEntries, plan.ReplaceRules, plan.AddVirtual, plan.UpdateVirtual,
		plan.AddReals, plan.Bind, plan.Unbind, plan.ReconcileFlows, plan.RemoveKubeProxyRules:
	default:
		// A kind of operation added without saying whether it starts or
		// stops a drain (TestEveryOperationIsNamed).
		panic(fmt.Sprintf("dataplane: no drain tracking of %T", op))
	}
}

// stop forgets a real server that no longer drains.
func (dr draining) stop(vk plan.VirtualKey, rk plan.RealKey) {
	delete(dr[vk], rk)
	if len(dr[vk]) == 0 {
		delete(dr, vk)
	}
}

// keep forgets the real servers of vk that current no longer holds.
func (dr draining) keep(vk plan.VirtualKey, current plan.Reals) {
	for rk := range dr[vk] {
		if _, ok := current.Get(rk); !ok {
			dr.stop(vk, rk)
		}
	}
}

// drain returns the drain settings of a plan made now: timeout, unless
// timeouts names one for a virtual server (planner.Planner.DrainTimeouts).
func (l *ledger) drain(timeout time.Duration, timeouts map[plan.VirtualKey]time.Duration) planner.Drain {
	return planner.Drain{Since: l.draining, Timeout: timeout, Timeouts: timeouts, Now: l.now()}
}

// drainingDue reports whether the draining real servers' connection
// counts should be read again at now (see drainingReadEvery).
func (l *ledger) drainingDue(now time.Time) bool {
	return len(l.draining) > 0 && now.Sub(l.drainingRead) >= drainingReadEvery
}

// refreshDraining reads the connection counts of the real servers that
// drain, one dump per virtual server that has some, so the plan can delete
// those whose connections ended.
func (l *ledger) refreshDraining(ctx context.Context, k *kernel) error {
	for vk := range l.draining {
		dests, err := k.ipvs.Destinations(ctx, ipvsKey(vk))
		if err != nil {
			return fmt.Errorf("dataplane: reading the real servers of %s: %w", vk, err)
		}
		current := realsFromIPVS(dests)
		if _, ok := l.state.Virtual[vk]; ok {
			l.state.Reals[vk] = current
		}
		l.draining.keep(vk, current)
	}
	return nil
}

// refreshLeaving reads the connection counts of the virtual servers in
// scope that lose real servers still at a weight, one dump each, so the
// plan deletes at once those with no connection and drains the others,
// as kube-proxy reads them before it deletes a real server.
func (l *ledger) refreshLeaving(ctx context.Context, k *kernel, desired *plan.KernelState, scope planner.Scope) error {
	for vk := range scopedVirtual(scope, l.state) {
		if _, ok := l.state.Virtual[vk]; !ok || !planner.LosesReals(l.state, desired, vk) {
			continue
		}
		dests, err := k.ipvs.Destinations(ctx, ipvsKey(vk))
		if errors.Is(err, ipvs.ErrServiceNotExist) {
			// Gone behind the dataplane's back: its deletions fail
			// harmlessly, and the next read of the kernel repairs it.
			continue
		}
		if err != nil {
			return fmt.Errorf("dataplane: reading the real servers of %s: %w", vk, err)
		}
		l.state.Reals[vk] = realsFromIPVS(dests)
	}
	return nil
}

// scopedVirtual yields the virtual servers scope covers: all of
// programmed's when it covers everything, ranged over, not copied (the
// callers replace real server lists only).
func scopedVirtual(scope planner.Scope, programmed *plan.KernelState) iter.Seq[plan.VirtualKey] {
	if scope.All {
		return maps.Keys(programmed.Virtual)
	}
	return maps.Keys(scope.Virtual)
}

// shareReals makes the programmed real server lists in scope that equal
// the desired ones the desired ones: after the kernel was read, the
// programmed state would otherwise hold a second copy of every list.
func (l *ledger) shareReals(desired *plan.KernelState, scope planner.Scope) {
	for vk := range scopedVirtual(scope, l.state) {
		have, ok := l.state.Reals[vk]
		if want, wanted := desired.Reals[vk]; ok && wanted && slices.Equal(have, want) {
			l.state.Reals[vk] = want
		}
	}
}
