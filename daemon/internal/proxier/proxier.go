// Package proxier is the daemon's core, as kube-proxy's proxier is its:
// it syncs the desired state a watcher.Tracker holds into a
// *dataplane.Dataplane, a whole state or only the changes, and brings what
// follows the services beside the kernel along: health (/healthz,
// /livez), the health-check node ports, the metrics, the traffic map, the
// Events of what a sync cannot program and the state file. While the
// source still lists its objects it prefills the kernel with what is
// listed so far.
//
// Proxier.Sync is the sync function a watcher.Runner calls, one call at
// a time; Proxier.WaitListed may run beside it.
package proxier

import (
	"context"
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
)

// Dataplane is what a Proxier needs of a *dataplane.Dataplane: an
// interface, so that a test can wrap a real one (see the package's tests).
type Dataplane interface {
	Sync(ctx context.Context, state *model.State) (*dataplane.Result, error)
	SyncChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error)
	Prefill(ctx context.Context, state *model.State) (*dataplane.Result, error)
	PrefillChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error)
	Owner(vk plan.VirtualKey) (model.ServicePortName, bool)
	Claims(name model.ServicePortName) []plan.VirtualKey
}

// Config is what a Proxier works with. Log, Dataplane, Tracker, Metrics,
// Health, Events and HealthChecks are required.
type Config struct {
	Log       *zap.Logger
	Dataplane Dataplane
	// Tracker holds the desired state; its source fills it.
	Tracker *watcher.Tracker
	Metrics *metrics.Metrics
	Health  *healthcheck.ProxyHealth
	// Events records Events on the objects a sync concerns.
	Events events.Recorder
	// HealthChecks serves the health-check node ports.
	HealthChecks *healthcheck.ServiceServers
	// Records writes the state file; nil without one. Its Daemon section
	// is Daemon.
	Records *status.Writer
	Daemon  status.Daemon
	// Traffic, with --service-traffic-metrics, maps the kernel's virtual
	// servers to the service ports it exports the traffic of; nil
	// without.
	Traffic *traffic.Collector
	// RemoveLegacy removes kube-proxy's iptables-legacy chains; nil
	// leaves them.
	RemoveLegacy func(ctx context.Context) (legacyiptables.Report, error)
	// RequestSync asks the runner for another sync, for a sync that
	// compared part of a reread of the kernel (Result.Sweeping), that
	// asks for the whole state (Result.NeedsState) or whose planning
	// panicked; nil asks for none.
	RequestSync func()
	// Programming, if set, is called before each prefill and sync until
	// a sync has programmed the kernel: the daemon eases its memory for
	// the first programming (memory.FirstSyncGC.Listed).
	Programming func()
	// Synced, if set, is called after each sync once one has programmed
	// the kernel, with whether that sync compared everything: the daemon
	// applies its memory limit after full ones (memory.AfterSync).
	Synced func(full bool)
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// progressEvery is how often a long sync logs that it is still
// going.
const progressEvery = 5 * time.Second

// Proxier syncs the tracker's desired state into the dataplane.
type Proxier struct {
	log       *zap.Logger
	dataplane Dataplane
	tracker   *watcher.Tracker
	metrics   *metrics.Metrics
	health    *healthcheck.ProxyHealth
	events    events.Recorder
	hc        *healthcheck.ServiceServers
	records   *status.Writer
	traffic   *traffic.Collector
	now       func() time.Time
	// legacy removes kube-proxy's iptables-legacy chains (nil: never);
	// legacyDone is set once it succeeded.
	legacy      func(ctx context.Context) (legacyiptables.Report, error)
	legacyDone  bool
	requestSync func()
	programming func()
	afterSync   func(full bool)

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

// New returns a Proxier that has synced nothing yet.
func New(cfg Config) *Proxier {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Proxier{
		log: cfg.Log, dataplane: cfg.Dataplane, tracker: cfg.Tracker, metrics: cfg.Metrics, health: cfg.Health,
		events: cfg.Events, hc: cfg.HealthChecks, records: cfg.Records, traffic: cfg.Traffic, now: now,
		legacy: cfg.RemoveLegacy, requestSync: cfg.RequestSync, programming: cfg.Programming, afterSync: cfg.Synced,
		record: status.Record{Daemon: cfg.Daemon},
	}
}

// Sync is the runner's sync function. Until the source has listed
// Services and EndpointSlices it prefills what is listed so far; then it
// syncs: the first time, and when the node's settings changed or the
// dataplane asks for it, the whole state; otherwise only what changed.
// An error means the sync left something to do: the runner tries again.
func (p *Proxier) Sync(ctx context.Context) error {
	if !p.synced && p.programming != nil {
		// The first prefill starts the first programming.
		p.programming()
	}
	if !p.tracker.Synced() {
		p.prefill(ctx)
		return nil
	}
	p.lastFull = false
	err := p.syncKernel(ctx)
	if p.synced && p.afterSync != nil {
		p.afterSync(p.lastFull)
	}
	return err
}

// WaitListed logs a line every five seconds until the source has listed
// Services and EndpointSlices, or ctx is done, so the reading of a large
// cluster before the first sync is not silent either. It may run beside
// Sync.
func (p *Proxier) WaitListed(ctx context.Context) {
	start := p.now()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for !p.tracker.Synced() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if p.tracker.Synced() {
				return
			}
			svc, ep := p.tracker.Pending()
			p.log.Info("waiting for Services and EndpointSlices to be listed and the Node read", zap.Duration("elapsed", p.now().Sub(start).Round(time.Second)),
				zap.Int("servicesSoFar", svc), zap.Int("endpointSlicesSoFar", ep), zap.Bool("nodeRead", p.tracker.NodeKnown()))
		}
	}
}
