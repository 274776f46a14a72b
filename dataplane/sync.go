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

// learnForeign tells the planner the virtual servers the last full read
// found another program's, and plans again with replan if that changes
// the desired state. It returns the model's errors, and whether it
// planned again or, without replan (a caller that has only changes), a
// Sync must.
func (d *Dataplane) learnForeign(replan replanner, modelErrs []error) (errs []error, replanned, needsState bool) {
	switch {
	case !d.planner.SetForeign(d.ledger.foreign):
		return modelErrs, false, false
	case replan == nil:
		return modelErrs, false, true
	}
	return replan(), true, false
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

func (d *Dataplane) sync(ctx context.Context, scope planner.Scope, modelErrs []error, replan replanner) (*Result, error) {
	if err := d.reader.turn.take(ctx); err != nil {
		return nil, fmt.Errorf("dataplane: waiting for the background read's request: %w", err)
	}
	defer d.reader.turn.give()
	desired, node := d.desiredNow()
	res := &Result{}
	// The kernel is read on the first sync and when the canary finds an
	// outside change, before anything is planned; the periodic reread
	// runs in the background, and the first sync after it ends merges it
	// and starts comparing it, a piece a sync.
	ahead := d.reader.ahead(ctx)
	reread, err := d.reader.finished()
	if err != nil {
		res.Errors = append(res.Errors, err)
	}
	// readNow: the kernel was read in this sync, connection counts and all.
	readNow := false
	switch {
	case d.ledger.state == nil || (!d.ledger.retry.All && d.reader.changedBehind(ctx, d.k, d.ledger.state, node)):
		d.reader.stop()
		d.stopSweep()
		observed, n, err := d.firstRead(ctx, ahead, desired, node, false)
		res.Retries += n
		if err != nil {
			d.ledger.state = nil
			return nil, fmt.Errorf("dataplane: reading the kernel: %w", err)
		}
		d.ledger.state, scope, res.Full, readNow = observed, planner.FullScope, true, true
		d.reader.lastFull = d.cfg.Now()
		var replanned bool
		if modelErrs, replanned, res.NeedsState = d.learnForeign(replan, modelErrs); replanned {
			// The read kept what the old desired state named.
			desired, node = d.desiredNow()
			dropUnowned(d.ledger.state, desired, node)
		}
	case d.prefilled:
		// A Prefill read the kernel and only added to it: this sync
		// compares everything, as a first sync does, with what it owns
		// by the whole state.
		dropUnowned(d.ledger.state, desired, node)
		scope, res.Full = planner.FullScope, true
	default:
		var err error
		if scope, err = d.changedScope(ctx, scope, reread, desired, node, res); err != nil {
			return nil, err
		}
	}
	d.ledger.retry, d.prefilled = planner.NewScope(), false
	scope = d.sweepPiece(scope, res)
	if !readNow {
		n, err := withRetries(ctx, func() error { return d.ledger.refreshLeaving(ctx, d.k, desired, scope) })
		res.Retries += n
		if err != nil {
			return nil, err
		}
	}
	d.program(ctx, res, scope, node)
	res.Errors = append(modelErrs, res.Errors...)
	return res, nil
}

// desiredNow returns the planner's desired state and node.
func (d *Dataplane) desiredNow() (*plan.KernelState, *model.Node) {
	desired, _ := d.planner.Desired()
	return desired, d.planner.Node()
}

// changedScope is what a sync that does not read the kernel itself
// compares: the changes in scope, the objects whose operations failed,
// and, at most once per drainingReadEvery, the real servers still
// draining, read again, unless a failure calls for
// everything. It first merges a finished periodic read, and starts the
// sweep that compares it piece by piece.
func (d *Dataplane) changedScope(ctx context.Context, scope planner.Scope, reread *reread, desired *plan.KernelState, node *model.Node, res *Result) (planner.Scope, error) {
	if reread != nil {
		res.Retries += reread.retries
		observed, err := d.observe(ctx, reread.read, desired, node, false)
		if err != nil {
			return scope, fmt.Errorf("dataplane: reading the kernel: %w", err)
		}
		d.ledger.state = mergeRead(observed, d.ledger.state, *reread.since)
		d.stopSweep()
		d.sweep = planner.NewSweep(d.ledger.state, desired)
	}
	if d.ledger.retry.All {
		return planner.FullScope, nil
	}
	d.ledger.retry.Merge(scope)
	if now := d.cfg.Now(); d.ledger.drainingDue(now) {
		n, err := withRetries(ctx, func() error { return d.ledger.refreshDraining(ctx, d.k) })
		res.Retries += n
		if err != nil {
			return scope, err
		}
		d.ledger.drainingRead = now
		for vk := range d.ledger.draining {
			d.ledger.retry.Virtual[vk] = true
		}
	}
	return *d.ledger.retry, nil
}

// A sweep is cut into about sweepPieces pieces of at least
// sweepPieceMin objects: at 10,000 services x 3 endpoints (some 130,000
// objects looked at) a piece takes about 3 ms natively where the whole
// compare in one sync took 45 ms and held back every change that came
// meanwhile, and a daemon whose syncs are a second apart still ends a
// sweep in half a minute, its sync period.
const (
	sweepPieces   = 32
	sweepPieceMin = 1024
)

// sweepPiece adds the sweep's next piece to scope, which a full compare
// needs none of; the sync that takes the last is Full.
func (d *Dataplane) sweepPiece(scope planner.Scope, res *Result) planner.Scope {
	if d.sweep == nil {
		return scope
	}
	if scope.All {
		d.stopSweep()
		res.Full = true
		return scope
	}
	done := d.sweep.Next(&scope, max(sweepPieceMin, d.sweep.Objects()/sweepPieces))
	if done {
		d.stopSweep()
		res.Full = true
	}
	res.Sweeping = !done
	return scope
}

// stopSweep abandons the sweep under way, if any.
func (d *Dataplane) stopSweep() {
	if d.sweep != nil {
		d.sweep.Stop()
		d.sweep = nil
	}
}

// firstRead reads what the kernel holds for a sync that compares
// everything, or for a prefill (adoptAll, see kernelRead.owned): the read
// ReadAhead started, if it succeeded, or a read now.
func (d *Dataplane) firstRead(ctx context.Context, ahead *reread, desired *plan.KernelState, node *model.Node, adoptAll bool) (observed *plan.KernelState, retries int, err error) {
	if ahead != nil && ahead.err == nil {
		observed, err = d.observe(ctx, ahead.read, desired, node, adoptAll)
		return observed, ahead.retries, err
	}
	retries, err = withRetries(ctx, func() (err error) {
		observed, err = d.observe(ctx, nil, desired, node, adoptAll)
		return err
	})
	return observed, retries, err
}

// program plans what scope covers against the programmed state and
// carries it out, starting the periodic reread when it is due; it fills
// res.
func (d *Dataplane) program(ctx context.Context, res *Result, scope planner.Scope, node *model.Node) {
	t := targetOf(d.planner)
	if !res.Full && d.reader.due(d.sweep != nil) {
		if err := d.reader.start(ctx, d.ledger.state, false); err != nil {
			res.Errors = append(res.Errors, err)
		}
		d.reader.lastFull = d.cfg.Now()
	}
	d.reader.planned(scope)
	if scope.All || scope.Global {
		res.Errors = append(res.Errors, d.settings.write(ctx, d.k, node)...)
	}
	res.Plan = d.ledger.diff(t, scope, d.cfg.DrainTimeout)
	out := d.apply.program(ctx, res.Plan, t, scope)
	res.Retries += out.rounds
	res.RulesFailed = rulesFailed(out.errs)
	res.Errors = append(res.Errors, out.errs...)
	res.Flows = out.flows
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
	d.stopSweep()
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
