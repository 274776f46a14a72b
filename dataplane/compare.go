package dataplane

import (
	"context"

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

// result is the Result of a sync that compared c, failed to prepare with
// prepErrs (see Dataplane.prepare), and carried out pl.
func (c *comparison) result(pl *plan.Plan, prepErrs []error, out applied) *Result {
	errs := append(append(c.errs, prepErrs...), out.errs...)
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
