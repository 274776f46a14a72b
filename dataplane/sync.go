package dataplane

import (
	"context"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// Result is what a sync did.
type Result struct {
	// Plan holds the operations the sync carried out (or tried to).
	Plan *plan.Plan
	// Full is true when the sync read the kernel and compared everything,
	// or compared the last piece of a periodic reread (see Sweeping).
	Full bool
	// Errors lists every failure of a sync that ran: the service ports
	// left out (*model.FieldError, *plan.ConflictError), those programmed
	// without what they ask (*model.SchedulerError, *model.SettingError),
	// the operations that failed (*OpError), what those held back
	// (*HeldBackError), and a failed background reread of the kernel.
	// Failed operations are tried again on the next sync. It is the one
	// place a sync's failures go: see [Dataplane.Sync].
	Errors []error
	// Sweeping is true when the sync compared a piece of what a periodic
	// reread of the kernel found, and pieces remain: the next syncs
	// compare them, a piece each, and the one that compares the last
	// is Full. A caller should sync again soon, changes or not.
	Sweeping bool
	// NeedsState is true when a SyncChanges read the kernel and found
	// another program's virtual servers coming or going where service
	// ports it was not given name them (external IPs and load-balancer
	// addresses do not take another program's virtual server): the
	// caller should make its next sync a Sync with the whole state.
	NeedsState bool
	// RulesFailed is true when creating a set, adding set entries or
	// writing the rules failed, in the last round of the sync: the node
	// is not programmed, and new virtual servers and addresses were held
	// back. kube-proxy does not count such a sync as an update for its
	// health.
	RulesFailed bool
	// Retries counts the rounds in which operations that failed with a
	// transient errno (ENOBUFS, EBUSY, ENOMEM, EAGAIN, EINTR) were tried
	// again within the sync, and the retried reads of the kernel.
	Retries int
	// Flows tallies the sync's conntrack cleanup.
	Flows FlowCleanup
}

// add tallies a deletion of n flows of family fam that took `took`.
func (f *FlowCleanup) add(fam inet.Family, n int, took time.Duration) {
	*f.Ran.Of(fam) = true
	*f.Deleted.Of(fam) += n
	*f.Took.Of(fam) += took
}

// FlowCleanup tallies the conntrack flows a sync deleted, per family,
// and the time that took: what kube-proxy's conntrack reconciler
// reports. Ran is false for a family nothing was deleted for.
type FlowCleanup struct {
	Ran     inet.PerFamily[bool]
	Deleted inet.PerFamily[int]
	Took    inet.PerFamily[time.Duration]
}

// Sync makes the kernel hold what state describes. The first sync, and a
// sync after Resync, reads the kernel once and compares everything; later
// ones plan only the service ports that changed, the objects whose
// operations failed before, and the real servers still draining.
//
// Failures are reported one way: a sync that ran returns a Result and a
// nil error, and lists whatever failed in Result.Errors (a failed sync is
// one with a *OpError there; Result.RulesFailed says whether the node's
// sets and rules are in place). The error is non-nil, and the Result nil,
// only when no sync ran: what it must read of the kernel before planning
// could not be read (the cause wrapped, errno or context error and all).
// This is the shape of go/packages' Load, whose per-package
// errors ride on the packages and whose error means nothing was loaded.
func (d *Dataplane) Sync(ctx context.Context, state *model.State) (*Result, error) {
	state = d.settings.served(state)
	checkErrs := d.settings.schedulers.check(ctx, d.planner, &state.Node, portSchedulers(state.Services))
	scope, modelErrs, err := d.plan(nil, func() (planner.Scope, []error) { return d.planner.Update(state) })
	if err != nil {
		return nil, err
	}
	return d.sync(ctx, scope, append(checkErrs, modelErrs...), replanWith(d.planner, state, checkErrs))
}

// replanner plans the whole state again, once the planner learned what
// changes it (planner.Planner.SetForeign), and returns the model's errors.
type replanner func() []error

// replanWith returns the replanner of a state, whose scheduler check
// found checkErrs.
func replanWith(p *planner.Planner, state *model.State, checkErrs []error) replanner {
	return func() []error {
		_, errs := p.Update(state)
		return append(slices.Clip(checkErrs), errs...)
	}
}

// plan runs one step of the planner. A panic there is a bug some input
// found, and leaves the planner's state unknown: it is dropped for a new
// one, and the panic returned as a *PlanPanicError naming changes, so that
// a daemon can leave those service ports out instead of crashing on every
// node at every start.
func (d *Dataplane) plan(changes []model.Change, step func() (planner.Scope, []error)) (scope planner.Scope, errs []error, err error) {
	defer func() {
		if v := recover(); v != nil {
			d.planner = d.newPlanner()
			var names []model.ServicePortName
			for _, c := range changes {
				names = append(names, c.Name)
			}
			err = &PlanPanicError{Services: names, Value: v, Stack: debug.Stack()}
		}
	}()
	scope, errs = step()
	return scope, errs, nil
}

// SyncChanges is Sync for a caller that tracks which service ports changed
// (a watcher does): it costs what the changes cost, whatever the number of
// services. The node's settings stay those of the last Sync, which must
// have come first: otherwise it returns ErrNotSynced. It reports failures
// as Sync does.
func (d *Dataplane) SyncChanges(ctx context.Context, changes []model.Change) (*Result, error) {
	if d.planner.Node() == nil {
		return nil, ErrNotSynced
	}
	checkErrs := d.settings.schedulers.check(ctx, d.planner, d.planner.Node(), changedSchedulers(changes))
	scope, modelErrs, err := d.plan(changes, func() (planner.Scope, []error) { return d.planner.UpdateChanges(changes) })
	if err != nil {
		return nil, err
	}
	return d.sync(ctx, scope, append(checkErrs, modelErrs...), nil)
}

// portSchedulers yields the schedulers service ports name.
func portSchedulers(ports []model.ServicePort) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range ports {
			if ports[i].Scheduler != "" && !yield(ports[i].Scheduler) {
				return
			}
		}
	}
}

// changedSchedulers yields the schedulers the changed service ports name.
func changedSchedulers(changes []model.Change) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, c := range changes {
			if c.Port != nil && c.Port.Scheduler != "" && !yield(c.Port.Scheduler) {
				return
			}
		}
	}
}

// sync compares the kernel with the desired state where it must, plans
// the difference and carries it out.
func (d *Dataplane) sync(ctx context.Context, changed planner.Scope, modelErrs []error, replan replanner) (*Result, error) {
	if err := d.reader.turn.take(ctx); err != nil {
		return nil, fmt.Errorf("dataplane: waiting for the background read's request: %w", err)
	}
	defer d.reader.turn.give()
	c, err := d.compare(ctx, changed, modelErrs, replan)
	if err != nil {
		return nil, err
	}
	beforeErrs := d.beforePlan(ctx, c)
	pl := d.ledger.diff(c.target, c.scope, d.cfg.DrainTimeout)
	out := d.apply.program(ctx, pl, c.target, c.scope)
	return c.result(pl, beforeErrs, out), nil
}

// target is the planner's desired state, taken once for a sync, and
// again only when the sync plans again after reading the kernel: what the
// kernel should hold, the service port each virtual server belongs to,
// and the node, with the planner that made them.
type target struct {
	planner *planner.Planner
	kernel  *plan.KernelState
	owners  map[plan.VirtualKey]model.ServicePortName
	node    *model.Node
}

// targetOf returns p's desired state.
func targetOf(p *planner.Planner) target {
	k, owners := p.Desired()
	return target{planner: p, kernel: k, owners: owners, node: p.Node()}
}

// beforePlan is what a sync does between deciding what it compares and
// planning: it starts the periodic reread when it is due, tells a running
// read what the sync plans, and writes the node's settings when the sync
// compares them. It returns their failures.
func (d *Dataplane) beforePlan(ctx context.Context, c *comparison) []error {
	var errs []error
	if !c.full && d.reader.due(d.pending.sweep != nil) {
		if err := d.reader.start(ctx, d.ledger.state, false); err != nil {
			errs = append(errs, err)
		}
		d.reader.lastFull = d.cfg.Now()
	}
	d.reader.planned(c.scope)
	if c.scope.All || c.scope.Global {
		errs = append(errs, d.settings.write(ctx, d.k, c.target.node)...)
	}
	return errs
}

// reconcilePlan is the plan of reconciliations.
func reconcilePlan(reconciles []plan.ReconcileFlows) *plan.Plan {
	ops := make([]plan.Op, len(reconciles))
	for i, r := range reconciles {
		ops[i] = r
	}
	return plan.New(ops...)
}

// Resync forgets what the dataplane believes the kernel holds, so the next
// Sync reads the kernel again and repairs whatever changed behind its back.
func (d *Dataplane) Resync() {
	d.reader.stop()
	d.pending.stopSweep()
	d.ledger.state = nil
}

// DryRun returns the plan a first sync of state would carry out against
// the kernel as it is now, and changes nothing.
func (d *Dataplane) DryRun(ctx context.Context, state *model.State) (*plan.Plan, []error, error) {
	state = d.settings.served(state)
	desired := plan.Build(state, nftrules.Render)
	observed, err := d.observe(ctx, nil, desired.Kernel, &state.Node, false)
	if err != nil {
		return nil, nil, fmt.Errorf("dataplane: reading the kernel: %w", err)
	}
	reconciles := reconcilePlan(planner.FirstReconciles(state))
	if len(d.ledger.foreign) == 0 {
		p := planner.Diff(planner.DiffInputs{Observed: observed, Desired: desired.Kernel, Services: desired.Services, Scope: planner.FullScope})
		p.Append(reconciles)
		return p, desired.Errors, nil
	}
	// Plan as a first sync does, without another program's virtual
	// servers, which the read kept when the state named them.
	fresh := planner.NewPlanner(nftrules.Render)
	fresh.SetForeign(d.ledger.foreign)
	_, errs := fresh.Update(state)
	k, owners := fresh.Desired()
	dropUnowned(observed, k, &state.Node)
	p := planner.Diff(planner.DiffInputs{Observed: observed, Desired: k, Services: owners, Scope: planner.FullScope})
	p.Append(reconciles)
	return p, errs, nil
}
