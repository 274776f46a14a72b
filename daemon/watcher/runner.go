package watcher

import (
	"context"
	"time"
)

// RunnerConfig configures a [Runner]. The zero value runs a sync on every
// request and never periodically.
type RunnerConfig struct {
	// MinSyncPeriod is the shortest time between syncs on average:
	// requests that come sooner are coalesced into one later sync.
	MinSyncPeriod time.Duration
	// Burst is how many syncs may run back to back before MinSyncPeriod
	// applies; 0 means kube-proxy's 2.
	Burst int
	// SyncPeriod is the longest time between syncs: a full sync runs at
	// least this often, requested or not. 0 disables periodic syncs.
	SyncPeriod time.Duration
	// RetryPeriod is when a failed sync is tried again; 0 means
	// SyncPeriod, as kube-proxy does (and with neither, the next request).
	RetryPeriod time.Duration
	// Ready gates the syncs: none runs while it returns false. Pass
	// [Tracker.Synced], and the tracker's OnChange calling
	// [Runner.Request], so the first sync runs as soon as both inputs are
	// listed.
	Ready func() bool
}

// Runner calls a sync function with kube-proxy's bounded frequency: on
// request, but no more often than MinSyncPeriod allows (after a burst),
// and at least every SyncPeriod. The function runs in [Runner.Run]'s
// goroutine, one call at a time; requests made while it runs are
// coalesced into a single follow-up sync.
type Runner struct {
	cfg      RunnerConfig
	fn       func(context.Context) error
	requests chan struct{}
}

// NewRunner returns a runner of fn. fn's error makes the runner try again
// after RetryPeriod.
func NewRunner(cfg RunnerConfig, fn func(context.Context) error) *Runner {
	if cfg.Burst <= 0 {
		cfg.Burst = 2
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = cfg.SyncPeriod
	}
	return &Runner{cfg: cfg, fn: fn, requests: make(chan struct{}, 1)}
}

// Request asks for a sync soon. It never blocks.
func (r *Runner) Request() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// never stands for "no periodic sync": a timer far in the future.
const never = 100 * 365 * 24 * time.Hour

// Run runs syncs until ctx is done, and returns ctx's error. Call it once.
func (r *Runner) Run(ctx context.Context) error {
	lim := newLimiter(r.cfg.MinSyncPeriod, r.cfg.Burst, time.Now())
	period := r.cfg.SyncPeriod
	if period <= 0 {
		period = never
	}
	timer := time.NewTimer(period)
	defer timer.Stop()
	due := time.Now().Add(period)
	// Since Go 1.23 a Reset timer never delivers the time it was due
	// before, so there is nothing to drain.
	arm := func(d time.Duration) {
		timer.Reset(d)
		due = time.Now().Add(d)
	}
	try := func() {
		now := time.Now()
		switch {
		case r.cfg.Ready != nil && !r.cfg.Ready():
			// The gate's opening requests the first sync.
		case lim.take(now):
			err := r.fn(ctx)
			next := period
			if err != nil && r.cfg.RetryPeriod > 0 {
				next = min(r.cfg.RetryPeriod, period)
			}
			arm(next)
		default:
			// Too soon: come back when a token is there, unless the
			// periodic sync is due before that anyway.
			if wait := lim.wait(now); now.Add(wait).Before(due) {
				arm(wait)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			arm(period)
			try()
		case <-r.requests:
			try()
		}
	}
}
