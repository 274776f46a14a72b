package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/problems"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// kernel is what the daemon needs of a *dataplane.Dataplane; tests give
// it a fake.
type kernel interface {
	Sync(ctx context.Context, state *model.State) (*dataplane.Result, error)
	Prefill(ctx context.Context, state *model.State) (*dataplane.Result, error)
	PrefillChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error)
	SyncChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error)
	DryRun(ctx context.Context, state *model.State) (*plan.Plan, []error, error)
	CheckScheduler(ctx context.Context, name string) error
	Owner(vk plan.VirtualKey) (model.ServicePortName, bool)
	ReadAhead(ctx context.Context) error
	InitNode(ctx context.Context, node *model.Node) error
	Cleanup(ctx context.Context) error
	Handover(ctx context.Context) error
	Close() error
}

// progressEvery is how often a long sync logs that it is still
// going.
const progressEvery = 5 * time.Second

// daemon syncs the tracker's desired state into the kernel; its sync
// method is the runner's sync function.
type daemon struct {
	log     *zap.Logger
	kernel  kernel
	tracker *watcher.Tracker
	metrics *metrics.Metrics
	health  *healthcheck.ProxyHealth
	// events records Events on the objects a sync concerns.
	events events.Recorder
	hc     *healthcheck.ServiceServers
	// records writes the state file; nil without one.
	records *status.Writer
	now     func() time.Time
	// requestSync asks the runner for another sync, for a sync that
	// compared part of a reread of the kernel (Result.Sweeping) or that
	// asks for the whole state (Result.NeedsState); nil before the
	// runner is made.
	requestSync func()

	// synced is true once a sync has programmed the kernel; lastFull,
	// when the last successful sync compared everything.
	synced   bool
	lastFull bool
	// wholeNext makes the next sync hand the dataplane the whole state,
	// which it asked for (Result.NeedsState).
	wholeNext bool
	record    status.Record
	// names holds each service port's keys in record.Services.
	names map[model.ServicePortName]status.PortNames
	// namesWritten is when the names file was last written; namesPending
	// says it is behind record.Services.
	namesWritten time.Time
	namesPending bool
	// recordWritten is when the state file was last written.
	recordWritten time.Time
	// problems are the conflicts and bad fields recorded as Events.
	problems problems.Events
	// traffic, with --service-traffic-metrics, maps the kernel's virtual
	// servers to the service ports it exports the traffic of.
	traffic *traffic.Collector
	// legacy removes kube-proxy's iptables-legacy chains (nil: never);
	// legacyDone is set once it succeeded.
	legacy     func(ctx context.Context) (legacyiptables.Report, error)
	legacyDone bool
	// nextPrefill is when the next prefill may start; prefilled, that the
	// last one read the kernel, so the next takes the changes alone;
	// listedTriggers are the trigger times the prefills took, for the
	// first sync to report.
	nextPrefill    time.Time
	prefilled      bool
	listedTriggers inet.PerFamily[[]time.Time]
	// quarantined are the service ports left out since their planning
	// panicked, until they change.
	quarantined map[model.ServicePortName]bool
}

// sync programs what changed since the last sync. The first sync and a
// sync after the node's settings changed hand the dataplane the whole
// state; the others, only the changes. The dataplane rereads the kernel
// once a sync period (its ResyncInterval), which repairs changes made
// behind the daemon's back.
func (d *daemon) sync(ctx context.Context) error {
	servicesPending, endpointsPending := d.tracker.Pending()
	u := d.takeUpdate()
	if !d.synced {
		for _, f := range inet.Families() {
			*u.TriggerTimes.Of(f) = append(u.TriggerTimes.Get(f), d.listedTriggers.Get(f)...)
		}
		// Handed on, as the tracker hands on its own once.
		d.listedTriggers = inet.PerFamily[[]time.Time]{}
	}
	start := d.now()
	full := !d.synced || u.NodeChanged || d.wholeNext
	d.withoutQuarantined(u, full)
	res, err := d.program(ctx, u, start, full)
	end := d.now()
	took := end.Sub(start)
	if err != nil {
		d.metrics.SyncFailed()
		if d.containPlanPanic(err, u) && d.requestSync != nil {
			d.requestSync()
		}
		d.log.Error("sync failed", zap.Duration("took", took), zap.Error(err))
		return err
	}
	d.synced, d.lastFull, d.wholeNext = true, res.Full, res.NeedsState
	if (res.Sweeping || res.NeedsState) && d.requestSync != nil {
		// The rest of the compare comes a piece a sync, changes or not.
		d.requestSync()
	}

	d.observeSync(u, res, end, took, servicesPending, endpointsPending)
	if !res.RulesFailed {
		// As kube-proxy, whose sync stops before it tells its health
		// server when a set or its rules cannot be written: the node is
		// not programmed, and the changes still wait.
		d.health.Updated()
	}
	d.followServices(u, full)
	failed := d.reportProblems(res)
	if res.Full && failed == 0 {
		d.removeLegacyLeftovers(ctx)
	}
	d.logSynced(u, res, took)
	d.writeRecord(u, u.Changes, res, start, took)
	if failed > 0 {
		d.metrics.SyncFailed()
		return fmt.Errorf("%d kernel operations failed; they are tried again", failed)
	}
	return nil
}

// removeLegacyLeftovers removes kube-proxy's chains from the
// iptables-legacy tables once a full sync has put ipvsplane's own rules in
// place, as the dataplane does last in such a sync for iptables-nft's; it
// tries again after each full sync until it succeeds once.
func (d *daemon) removeLegacyLeftovers(ctx context.Context) {
	if d.legacy == nil || d.legacyDone {
		return
	}
	r, err := d.legacy(ctx)
	if len(r.Removed) > 0 {
		d.log.Info("removed kube-proxy's iptables-legacy chains", zap.Int("count", len(r.Removed)), zap.Strings("chains", r.Removed))
	}
	if len(r.Unreadable) > 0 {
		d.log.Warn("the node's iptables-legacy tables are in use and cannot be read: chains a kube-proxy left there are not removed",
			zap.Strings("missingPrograms", r.Unreadable))
	}
	if err != nil {
		d.log.Warn("cannot remove kube-proxy's iptables-legacy chains; trying again after the next full sync", zap.Error(err))
		return
	}
	d.legacyDone = true
}

// takeUpdate takes what the tracker holds: everything for the first
// sync and when the dataplane asks for it, else only the changes, so that
// a sync costs what changed, not the size of the cluster.
func (d *daemon) takeUpdate() *watcher.Update {
	if d.synced && !d.wholeNext {
		return d.tracker.SyncChanges()
	}
	return d.tracker.Sync()
}

// program hands the dataplane the whole state when full, else only the
// changes, logging progress while it works.
func (d *daemon) program(ctx context.Context, u *watcher.Update, start time.Time, full bool) (*dataplane.Result, error) {
	stop := d.progress(start, u.ServicePorts, full)
	defer stop()
	if full {
		return d.kernel.Sync(ctx, &u.State)
	}
	return d.kernel.SyncChanges(ctx, u.Changes)
}

// observeSync records a successful sync in the metrics; servicesPending
// and endpointsPending are the changes it took.
func (d *daemon) observeSync(u *watcher.Update, res *dataplane.Result, end time.Time, took time.Duration, servicesPending, endpointsPending int) {
	s, e := d.tracker.Pending()
	d.metrics.ObserveSync(metrics.Sync{
		Result: res, Took: took, End: end, ServiceChanges: servicesPending, EndpointChanges: endpointsPending,
		ServicesPending: s, EndpointsPending: e, ServicePorts: u.ServicePorts, TriggerTimes: u.TriggerTimes, Arrivals: u.Arrivals,
	})
}

// followServices brings what tracks the services beside the kernel, the
// health-check servers, the no-local-endpoint metric and the traffic
// metrics, up to the update: all of it when full, else the changes.
func (d *daemon) followServices(u *watcher.Update, full bool) {
	changes := u.Changes
	// The node's addresses may have changed since the last sync; the
	// health-check ports follow them before the services are updated.
	d.hc.SetAddresses(plan.HealthCheckAddresses(&u.State.Node))
	if full {
		d.hc.Replace(u.State.Services)
		d.metrics.ReplaceServices(u.State.Node.Name, u.State.Services)
	} else {
		d.hc.Apply(changes)
		d.metrics.ApplyChanges(u.State.Node.Name, changes)
	}
	if d.traffic != nil {
		if full {
			d.traffic.Replace(&u.State.Node, u.State.Services, d.kernel.Owner)
		} else {
			d.traffic.Apply(&u.State.Node, changes, d.kernel.Owner)
		}
	}
}

// reportProblems records the sync's problems as Events and logs them, up
// to status.MaxRecordedErrors: a problem that persists from sync to sync (a
// conflict, a bad field) once while it lasts, as its Event, and the
// sync's own errors every time. It returns how many kernel operations
// failed.
func (d *daemon) reportProblems(res *dataplane.Result) int {
	failed := 0
	for _, e := range res.Errors {
		if errors.As(e, new(*dataplane.OpError)) && !refusedRealServer(e) {
			failed++
		}
	}
	fresh := d.problems.Report(d.events, res.Errors)
	for _, e := range fresh[:min(len(fresh), status.MaxRecordedErrors)] {
		d.log.Warn("sync problem", zap.Error(e))
	}
	if len(fresh) > status.MaxRecordedErrors {
		d.log.Warn("more sync problems not logged", zap.Int("count", len(fresh)-status.MaxRecordedErrors))
	}
	return failed
}

// refusedRealServer reports whether err is the kernel refusing one real
// server as invalid (EINVAL): an endpoint address the API accepts and IPVS
// does not, such as a subnet's broadcast address. It is a problem of that
// Service alone, reported as such; the rest of the node is programmed, so
// it fails neither the sync nor the removal of kube-proxy's leftovers,
// which would otherwise never run.
func refusedRealServer(err error) bool {
	var op *dataplane.OpError
	if !errors.As(err, &op) || !errors.Is(op.Err, unix.EINVAL) {
		return false
	}
	switch op.Op.(type) {
	case plan.AddReals, plan.UpdateReal:
		return true
	}
	return false
}

// logSynced logs the sync's summary: at info level for a full sync and a
// sync with failures, at debug level for the incremental ones, as
// kube-proxy logs each sync at V(4): under churn they come many a second.
func (d *daemon) logSynced(u *watcher.Update, res *dataplane.Result, took time.Duration) {
	level := zap.DebugLevel
	if res.Full || len(res.Errors) > 0 {
		level = zap.InfoLevel
	}
	d.log.Log(level, "synced", zap.Bool("full", res.Full), zap.Int("operations", res.Plan.Len()),
		zap.Int("changed", len(u.Changed)), zap.Int("servicePorts", u.ServicePorts),
		zap.Int("errors", len(res.Errors)), zap.Bool("sweeping", res.Sweeping), zap.Duration("took", took))
}

// progress logs a line every progressEvery while a sync runs, so a long
// initial sync of a large cluster is not silent. The returned function
// stops it.
func (d *daemon) progress(start time.Time, ports int, full bool) func() {
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
				d.log.Info("sync in progress", zap.Duration("elapsed", d.now().Sub(start).Round(time.Second)),
					zap.Int("servicePorts", ports), zap.Bool("full", full))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// waitListed logs a line every progressEvery until the source has listed
// Services and EndpointSlices, so the reading of a large cluster before
// the first sync is not silent either.
func (d *daemon) waitListed(ctx context.Context) {
	start := d.now()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for !d.tracker.Synced() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.tracker.Synced() {
				return
			}
			svc, ep := d.tracker.Pending()
			d.log.Info("waiting for Services and EndpointSlices to be listed and the Node read", zap.Duration("elapsed", d.now().Sub(start).Round(time.Second)),
				zap.Int("servicesSoFar", svc), zap.Int("endpointSlicesSoFar", ep), zap.Bool("nodeRead", d.tracker.NodeKnown()))
		}
	}
}

func (d *daemon) writeRecord(u *watcher.Update, changes []model.Change, res *dataplane.Result, start time.Time, took time.Duration) {
	if d.records == nil {
		return
	}
	r := &d.record
	r.PID = os.Getpid()
	r.LastSync = start.Add(took)
	r.DurationSeconds = took.Seconds()
	r.Full = res.Full
	r.Operations = res.Plan.Len()
	r.Syncs++
	if r.Syncs == 1 {
		r.FirstSyncSeconds = r.DurationSeconds
	}
	r.ErrorCount = len(res.Errors)
	r.Errors = r.Errors[:0]
	for _, e := range res.Errors[:min(len(res.Errors), status.MaxRecordedErrors)] {
		r.Errors = append(r.Errors, e.Error())
	}
	r.ServicePorts = u.ServicePorts
	d.namesPending = d.updateNames(u, changes) || d.namesPending
	// Under churn a sync may follow every change, and writing the files
	// after each cost as much as the syncs: the names file holds every
	// service port (at 10,000 services, 4 ms and 1.2 MB of garbage to
	// encode natively). The record is handed to the writer at most once
	// per recordEvery and the names at most once per namesEvery; the
	// next sync after that catches up, and the periodic sync bounds how
	// stale they get.
	now := d.now()
	if !res.Full && now.Sub(d.recordWritten) < recordEvery {
		return
	}
	names := d.namesPending && (res.Full || now.Sub(d.namesWritten) >= namesEvery)
	// The writer owns what it is given: the names are copied (a
	// fraction of encoding them), and the errors, whose slice the next
	// sync reuses.
	snapshot := *r
	snapshot.Errors = slices.Clone(r.Errors)
	snapshot.Services = nil
	if names {
		snapshot.Services = maps.Clone(r.Services)
	}
	d.records.Put(snapshot)
	d.recordWritten = now
	if names {
		d.namesWritten, d.namesPending = now, false
	}
}

// How often at most the state file and the names file are written.
const (
	recordEvery = time.Second
	namesEvery  = 5 * time.Second
)

// updateNames keeps the record's map of virtual servers to service names
// up to date, in the time the changes take, and reports whether it
// changed: endpoint changes leave it as it is. A virtual server ports
// contend for names the port the kernel programs it for.
func (d *daemon) updateNames(u *watcher.Update, changes []model.Change) bool {
	r := &d.record
	if d.names == nil {
		d.names = make(map[model.ServicePortName]status.PortNames, len(u.State.Services))
		r.Services = status.ServiceNames(u.State.Services, d.names, d.kernel.Owner)
		return true
	}
	dirty := false
	for _, c := range changes {
		old := d.names[c.Name]
		var cur status.PortNames
		if c.Port != nil {
			cur = status.NamesOf(c.Port)
		}
		if slices.Equal(old.Keys, cur.Keys) {
			continue
		}
		dirty = true
		status.Rename(r.Services, c.Name, old, cur, d.kernel.Owner)
		if cur.Keys == nil {
			delete(d.names, c.Name)
		} else {
			d.names[c.Name] = cur
		}
	}
	return dirty
}
