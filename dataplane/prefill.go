package dataplane

import (
	"context"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// Prefill programs what state adds to the kernel and nothing else: the
// sets, entries, virtual servers, real servers and addresses the kernel
// lacks, the rules, and the node's settings (see [plan.Plan.Additions]).
// Nothing the kernel holds is removed or changed, so state may be partial:
// a start calls Prefill with what it has listed so far, while the rest of
// the cluster is still being read, and the kernel's writes overlap the
// listing. The next Sync compares everything, as a first sync does, and
// removes what the whole state does not hold.
//
// The virtual servers a port claims through an external IP or a
// load-balancer address, which any tenant may write, wait for that Sync:
// in a partial state they might go to a tenant naming another Service's
// cluster IP that is not listed yet.
//
// Failures are reported as Sync reports them; a failed operation is
// not tried again within the Prefill, but by the next Sync.
func (d *Dataplane) Prefill(ctx context.Context, state *model.State) (*Result, error) {
	state = d.settings.served(state)
	checkErrs := d.settings.schedulers.check(ctx, d.planner, &state.Node, portSchedulers(state.Services))
	_, modelErrs := d.planner.Update(state)
	return d.prefill(ctx, planner.FullScope, append(checkErrs, modelErrs...), replanWith(d.planner, state, checkErrs))
}

// PrefillChanges is Prefill for a caller that tracks which service ports
// changed since the last Prefill (a watcher does): it costs what the
// changes cost, not what is listed so far. A Prefill must have read the
// kernel first: otherwise it returns ErrNotSynced. The node's settings
// stay those of the last Prefill.
func (d *Dataplane) PrefillChanges(ctx context.Context, changes []model.Change) (*Result, error) {
	if d.ledger.state == nil || d.planner.Node() == nil {
		return nil, ErrNotSynced
	}
	checkErrs := d.settings.schedulers.check(ctx, d.planner, d.planner.Node(), changedSchedulers(changes))
	scope, modelErrs := d.planner.UpdateChanges(changes)
	return d.prefill(ctx, scope, append(checkErrs, modelErrs...), nil)
}

// prefill carries out the additions of the plan within scope, reading the
// kernel first if nothing has read it yet; replan plans again when the
// read finds another program's virtual servers that matter.
func (d *Dataplane) prefill(ctx context.Context, scope planner.Scope, modelErrs []error, replan replanner) (*Result, error) {
	if err := d.reader.turn.take(ctx); err != nil {
		return nil, fmt.Errorf("dataplane: waiting for the background read's request: %w", err)
	}
	defer d.reader.turn.give()
	c := &comparison{target: targetOf(d.planner), scope: scope, modelErrs: modelErrs}
	var beforeErrs []error
	if d.ledger.state == nil {
		// A prefill's first read has the whole state to plan again with.
		if err := d.readAll(ctx, c, d.reader.ahead(ctx), true, replan); err != nil {
			return nil, err
		}
		beforeErrs = d.settings.write(ctx, d.k, c.target.node)
	}
	t := c.target
	pl := planner.Diff(planner.DiffInputs{Observed: d.ledger.state, Desired: t.kernel, Services: t.owners, Scope: c.scope}).Additions(t.planner.ClaimedByAnyone())
	d.ledger.state.Grow(pl)
	var out applied
	out.errs = d.apply.apply(ctx, pl, t, &out.flows)
	d.pending.prefilled = true
	return c.result(pl, beforeErrs, out), nil
}
