package proxier

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
)

// syncKernel programs what changed since the last sync. Whether the sync
// is full, handing the dataplane the whole state rather than the
// changes, is decided once, as the update is taken, and carried with it
// (Update.Whole) for what follows to read: full for the first sync, when
// the dataplane asked for the whole state (wholeNext), and when the
// node's settings changed, which the tracker knows as it hands the update
// over. Other syncs take only the changes, so that a sync costs what
// changed, not the size of the cluster. The dataplane rereads the kernel
// once a sync period (its ResyncInterval), which repairs changes made
// behind the daemon's back.
func (p *Proxier) syncKernel(ctx context.Context) error {
	servicesPending, endpointsPending := p.tracker.Pending()
	var u *watcher.Update
	if !p.synced || p.wholeNext {
		u = p.tracker.Sync()
	} else {
		// Whole all the same when the node changed.
		u = p.tracker.SyncChanges()
	}
	if !p.synced {
		for _, f := range inet.Families() {
			*u.TriggerTimes.Of(f) = append(u.TriggerTimes.Get(f), p.listedTriggers.Get(f)...)
		}
		// Handed on, as the tracker hands on its own once.
		p.listedTriggers = inet.PerFamily[[]time.Time]{}
	}
	start := p.now()
	p.withoutQuarantined(u)
	res, err := p.program(ctx, u, start)
	end := p.now()
	took := end.Sub(start)
	if err != nil {
		p.metrics.SyncFailed()
		if p.containPlanPanic(err, u) && p.requestSync != nil {
			p.requestSync()
		}
		p.log.Error("sync failed", zap.Duration("took", took), zap.Error(err))
		return err
	}
	p.synced, p.lastFull, p.wholeNext = true, res.Full, res.NeedsState
	if (res.Sweeping || res.NeedsState) && p.requestSync != nil {
		// The rest of the compare comes a piece a sync, changes or not.
		p.requestSync()
	}

	p.observeSync(u, res, end, took, servicesPending, endpointsPending)
	if !res.RulesFailed {
		// As kube-proxy, whose sync stops before it tells its health
		// server when a set or its rules cannot be written: the node is
		// not programmed, and the changes still wait.
		p.health.Updated()
	}
	p.followServices(u)
	failed := p.reportProblems(res)
	if res.Full && failed == 0 {
		p.removeLegacyLeftovers(ctx)
	}
	p.logSynced(u, res, took)
	p.writeRecord(u, u.Changes, res, start, took)
	if failed > 0 {
		p.metrics.SyncFailed()
		return fmt.Errorf("%d kernel operations failed; they are tried again", failed)
	}
	return nil
}

// program hands the dataplane the whole state when the update is whole,
// else only the changes, logging progress while it works.
func (p *Proxier) program(ctx context.Context, u *watcher.Update, start time.Time) (*dataplane.Result, error) {
	stop := p.progress(start, u.ServicePorts, u.Whole)
	defer stop()
	if u.Whole {
		return p.dataplane.Sync(ctx, &u.State)
	}
	return p.dataplane.SyncChanges(ctx, u.Changes)
}

// observeSync records a successful sync in the metrics; servicesPending
// and endpointsPending are the changes it took.
func (p *Proxier) observeSync(u *watcher.Update, res *dataplane.Result, end time.Time, took time.Duration, servicesPending, endpointsPending int) {
	s, e := p.tracker.Pending()
	p.metrics.ObserveSync(metrics.Sync{
		Result: res, Took: took, End: end, ServiceChanges: servicesPending, EndpointChanges: endpointsPending,
		ServicesPending: s, EndpointsPending: e, ServicePorts: u.ServicePorts, TriggerTimes: u.TriggerTimes, Arrivals: u.Arrivals,
	})
}

// followServices brings what tracks the services beside the kernel, the
// health-check servers, the no-local-endpoint metric and the traffic
// metrics, up to the update: all of it when the update is whole, else the
// changes.
func (p *Proxier) followServices(u *watcher.Update) {
	node := &u.State.Node
	// The node's addresses may have changed since the last sync; the
	// health-check ports follow them before the services are updated.
	p.hc.SetAddresses(plan.HealthCheckAddresses(node))
	if u.Whole {
		p.hc.Replace(u.State.Services)
		p.metrics.ReplaceServices(node.Name, u.State.Services)
		if p.traffic != nil {
			p.traffic.Replace(u.State.Services, p.dataplane)
		}
		return
	}
	p.hc.Apply(u.Changes)
	p.metrics.ApplyChanges(node.Name, u.Changes)
	if p.traffic != nil {
		p.traffic.Apply(u.Changes, p.dataplane)
	}
}

// logSynced logs the sync's summary: at info level for a full sync and a
// sync with failures, at debug level for the incremental ones, as
// kube-proxy logs each sync at V(4): under churn they come many a second.
func (p *Proxier) logSynced(u *watcher.Update, res *dataplane.Result, took time.Duration) {
	level := zap.DebugLevel
	if res.Full || len(res.Errors) > 0 {
		level = zap.InfoLevel
	}
	p.log.Log(level, "synced", zap.Bool("full", res.Full), zap.Int("operations", res.Plan.Len()),
		zap.Int("changed", len(u.Changed)), zap.Int("servicePorts", u.ServicePorts),
		zap.Int("errors", len(res.Errors)), zap.Bool("sweeping", res.Sweeping), zap.Duration("took", took))
}

// progress logs a line every progressEvery while a sync runs, so a long
// initial sync of a large cluster is not silent. The returned function
// stops it.
func (p *Proxier) progress(start time.Time, ports int, full bool) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.log.Info("sync in progress", zap.Duration("elapsed", p.now().Sub(start).Round(time.Second)),
					zap.Int("servicePorts", ports), zap.Bool("full", full))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
