package proxier

import (
	"context"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
)

// prefillEvery is the least time from the end of one prefill to the
// start of the next.
const prefillEvery = time.Second

// prefill programs what the tracker has listed so far while the start's
// listing goes on, adding to the kernel only (see dataplane's Prefill): the
// kernel's writes overlap the listing, and the first sync, once
// everything is listed, has only the rest to do and what to remove. A
// round starts no sooner after the last than twice the time that one
// took, and prefillEvery at the least, so the listing keeps most of the
// CPU. A failure is logged; the first sync does it all anyway.
func (p *Proxier) prefill(ctx context.Context) {
	start := p.now()
	if start.Before(p.nextPrefill) {
		return
	}
	// After a prefill that read the kernel, the next ones take what was
	// listed since; a change of the node's settings takes everything
	// (SyncChanges holds the whole state then: Update.Whole).
	var u *watcher.Update
	var res *dataplane.Result
	var err error
	if p.prefilled {
		u = p.tracker.SyncChanges()
	} else {
		u = p.tracker.Sync()
	}
	if u.Whole {
		res, err = p.dataplane.Prefill(ctx, &u.State)
	} else {
		res, err = p.dataplane.PrefillChanges(ctx, u.Changes)
	}
	p.prefilled = err == nil
	// The first sync reports the latency of what changed while listing.
	for _, f := range inet.Families() {
		*p.listedTriggers.Of(f) = append(p.listedTriggers.Get(f), u.TriggerTimes.Get(f)...)
	}
	end := p.now()
	took := end.Sub(start)
	p.nextPrefill = end.Add(max(prefillEvery, 2*took))
	p.metrics.ObservePrefill(res, took)
	if err != nil {
		p.log.Warn("prefill failed; the first sync, after the listing, does it all", zap.Duration("took", took), zap.Error(err))
		return
	}
	p.log.Info("prefilled what is listed so far", zap.Int("operations", res.Plan.Len()), zap.Int("servicePorts", u.ServicePorts),
		zap.Int("errors", len(res.Errors)), zap.Duration("took", took))
}
