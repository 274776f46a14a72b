package dataplane

import (
	"context"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// comparison is what one sync compares with the programmed state, and
// what deciding it found: the sync's Result but for what carrying out
// its plan adds (see comparison.result).
type comparison struct {
	// target is the desired state compared with.
	target target
	scope  planner.Scope
	// full is true when the sync compares everything; read when it read
	// the kernel itself, connection counts and all.
	full, read bool
	// sweeping and needsState are Result's.
	sweeping, needsState bool
	// modelErrs are the planner's errors, those of the last plan when the
	// sync planned again.
	modelErrs []error
	// errs holds the failure of a background read.
	errs []error
	// retries counts the retried reads (Result.Retries).
	retries int
}

// retrying runs fn as withRetries does, counting its retries.
func (c *comparison) retrying(ctx context.Context, fn func() error) error {
	n, err := withRetries(ctx, fn)
	c.retries += n
	return err
}

// result is the Result of a sync that compared c, failed before planning
// with beforeErrs (see Dataplane.beforePlan), and carried out pl.
func (c *comparison) result(pl *plan.Plan, beforeErrs []error, out applied) *Result {
	errs := append(append(c.errs, beforeErrs...), out.errs...)
	return &Result{
		Plan:        pl,
		Full:        c.full,
		Errors:      append(c.modelErrs, errs...),
		Sweeping:    c.sweeping,
		NeedsState:  c.needsState,
		RulesFailed: rulesFailed(out.errs),
		Retries:     c.retries + out.rounds,
		Flows:       out.flows,
	}
}

// compare decides what a sync compares with the programmed state (see
// comparison). The kernel is read whole on the first sync and when the
// canary finds an outside change, before anything is planned; the
// periodic reread runs in the background, and the first sync after it
// ends merges it and starts comparing it, a piece a sync.
func (d *Dataplane) compare(ctx context.Context, changed planner.Scope, modelErrs []error, replan replanner) (*comparison, error) {
	c := &comparison{target: targetOf(d.planner), scope: changed, modelErrs: modelErrs}
	ahead := d.reader.ahead(ctx)
	reread, err := d.reader.finished()
	if err != nil {
		c.errs = append(c.errs, err)
	}
	switch {
	case d.ledger.state == nil || (!d.ledger.retry.All && d.reader.canary.changedBehind(ctx, d.cfg.Now(), d.k, d.ledger.state, d.cfg.Device, c.target.node)):
		d.reader.stop()
		d.pending.stopSweep()
		if err := d.readAll(ctx, c, ahead, false, replan); err != nil {
			return nil, err
		}
		c.full, c.read = true, true
	case d.pending.prefilled:
		// A Prefill read the kernel and only added to it: this sync
		// compares everything, as a first sync does, with what it owns
		// by the whole state.
		dropUnowned(d.ledger.state, c.target.kernel, c.target.node)
		c.scope, c.full = planner.FullScope, true
	default:
		if c.scope, err = d.changedScope(ctx, c, reread); err != nil {
			return nil, err
		}
	}
	d.ledger.retry, d.pending.prefilled = planner.NewScope(), false
	d.pending.nextPiece(c)
	if !c.read {
		err := c.retrying(ctx, func() error { return d.ledger.refreshLeaving(ctx, d.k, c.target.kernel, c.scope) })
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readAll reads the whole kernel for a sync or prefill that compares
// everything (adoptAll for a prefill, see kernelRead.owned): the read
// ReadAhead started, if it succeeded, or a read now. The read becomes the
// programmed state. When it finds another program's virtual servers that
// change the desired state, the planner learns them and plans again with
// replan, or, without replan (a caller that has only changes), the
// result asks for a Sync.
func (d *Dataplane) readAll(ctx context.Context, c *comparison, ahead *reread, adoptAll bool, replan replanner) error {
	var observed *plan.KernelState
	var err error
	if ahead != nil && ahead.err == nil {
		c.retries += ahead.retries
		observed, err = d.observe(ctx, ahead.read, c.target.kernel, c.target.node, adoptAll)
	} else {
		err = c.retrying(ctx, func() (err error) {
			observed, err = d.observe(ctx, nil, c.target.kernel, c.target.node, adoptAll)
			return err
		})
	}
	if err != nil {
		d.ledger.state = nil
		return fmt.Errorf("dataplane: reading the kernel: %w", err)
	}
	d.ledger.state, c.scope = observed, planner.FullScope
	d.reader.lastFull = d.cfg.Now()
	switch {
	case !d.planner.SetForeign(d.ledger.foreign):
	case replan == nil:
		c.needsState = true
	default:
		c.modelErrs = replan()
		c.target = targetOf(d.planner)
		if !adoptAll {
			// The read kept what the old desired state named.
			dropUnowned(d.ledger.state, c.target.kernel, c.target.node)
		}
	}
	return nil
}

// changedScope is what a sync that does not read the kernel whole
// compares: the changes, the objects whose operations failed, and, at
// most once per drainingReadEvery, the real servers still draining, read
// again, unless a failure calls for everything. It first merges a
// finished periodic read, and starts the sweep that compares it piece by
// piece.
func (d *Dataplane) changedScope(ctx context.Context, c *comparison, reread *reread) (planner.Scope, error) {
	l := d.ledger
	if reread != nil {
		c.retries += reread.retries
		observed, err := d.observe(ctx, reread.read, c.target.kernel, c.target.node, false)
		if err != nil {
			return c.scope, fmt.Errorf("dataplane: reading the kernel: %w", err)
		}
		l.state = mergeRead(observed, l.state, *reread.since)
		d.pending.startSweep(l.state, c.target.kernel)
	}
	if l.retry.All {
		return planner.FullScope, nil
	}
	l.retry.Merge(c.scope)
	if now := d.cfg.Now(); l.drainingDue(now) {
		if err := c.retrying(ctx, func() error { return l.refreshDraining(ctx, d.k) }); err != nil {
			return c.scope, err
		}
		l.drainingRead = now
		for vk := range l.draining {
			l.retry.Virtual[vk] = true
		}
	}
	return *l.retry, nil
}

// pending remembers what the next syncs must compare beyond their
// changes: everything after a Prefill, and, after a periodic reread, what
// it found, a piece a sync.
type pending struct {
	// prefilled is set by Prefill: the next sync compares everything.
	prefilled bool
	// sweep compares what the last periodic read found a piece a sync,
	// until it is done; nil when none is under way.
	sweep *planner.Sweep
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

// startSweep starts comparing programmed, merged from a periodic read,
// with desired, a piece a sync, abandoning the sweep under way.
func (p *pending) startSweep(programmed, desired *plan.KernelState) {
	p.stopSweep()
	p.sweep = planner.NewSweep(programmed, desired)
}

// nextPiece adds the sweep's next piece to c's scope, which a full
// compare needs none of; the sync that takes the last is full.
func (p *pending) nextPiece(c *comparison) {
	if p.sweep == nil {
		return
	}
	if c.scope.All {
		p.stopSweep()
		c.full = true
		return
	}
	done := p.sweep.Next(&c.scope, max(sweepPieceMin, p.sweep.Objects()/sweepPieces))
	if done {
		p.stopSweep()
		c.full = true
	}
	c.sweeping = !done
}

// stopSweep abandons the sweep under way, if any.
func (p *pending) stopSweep() {
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
}
