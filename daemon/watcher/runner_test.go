package watcher

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// runnerHarness runs a Runner in a synctest bubble, whose clock moves only
// when every goroutine in it waits, and records when its syncs ran, as
// offsets from the start. Create it inside synctest.Test.
type runnerHarness struct {
	t     *testing.T
	start time.Time
	r     *Runner
	ready atomic.Bool

	mu   sync.Mutex
	runs []time.Duration
	// fail makes the next syncs return an error.
	fail int
	// block, when set, holds the next sync until it is closed.
	block chan struct{}
}

func newRunnerHarness(t *testing.T, cfg RunnerConfig, gated bool) *runnerHarness {
	h := &runnerHarness{t: t, start: time.Now()}
	h.ready.Store(!gated)
	cfg.Ready = h.ready.Load
	h.r = NewRunner(cfg, func(context.Context) error {
		h.mu.Lock()
		h.runs = append(h.runs, time.Since(h.start))
		block := h.block
		h.block = nil
		fail := h.fail > 0
		h.fail--
		h.mu.Unlock()
		if block != nil {
			<-block
		}
		if fail {
			return errors.New("sync failed")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	synctest.Wait()
	return h
}

// request asks for a sync and waits until the loop has handled it.
func (h *runnerHarness) request() { h.r.Request(); synctest.Wait() }

// step lets d pass, the loop's timers firing on time within it.
func (h *runnerHarness) step(d time.Duration) { time.Sleep(d); synctest.Wait() }

func (h *runnerHarness) recorded() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.runs)
}

func TestRunnerTiming(t *testing.T) {
	const s = time.Second
	type step struct {
		request bool
		open    bool
		advance time.Duration
	}
	req, open := step{request: true}, step{open: true}
	adv := func(d time.Duration) step { return step{advance: d} }
	tests := []struct {
		name  string
		cfg   RunnerConfig
		gated bool
		fail  int
		steps []step
		want  []time.Duration
	}{{
		name:  "no min period: every request runs",
		cfg:   RunnerConfig{SyncPeriod: 30 * s},
		steps: []step{req, req, req},
		want:  []time.Duration{0, 0, 0},
	}, {
		name:  "burst of two, then one per min period",
		cfg:   RunnerConfig{MinSyncPeriod: 10 * s, SyncPeriod: time.Hour},
		steps: []step{req, req, req, adv(5 * s), adv(5 * s), req},
		want:  []time.Duration{0, 0, 10 * s},
	}, {
		name:  "requests during the wait are coalesced",
		cfg:   RunnerConfig{MinSyncPeriod: 10 * s, SyncPeriod: time.Hour},
		steps: []step{req, req, req, adv(2 * s), req, req, adv(8 * s), adv(20 * s)},
		want:  []time.Duration{0, 0, 10 * s},
	}, {
		name:  "tokens refill at one per min period",
		cfg:   RunnerConfig{MinSyncPeriod: 10 * s, SyncPeriod: time.Hour},
		steps: []step{req, req, adv(15 * s), req, req, adv(5 * s)},
		want:  []time.Duration{0, 0, 15 * s, 20 * s},
	}, {
		name:  "burst setting",
		cfg:   RunnerConfig{MinSyncPeriod: 10 * s, SyncPeriod: time.Hour, Burst: 3},
		steps: []step{req, req, req, req, adv(10 * s)},
		want:  []time.Duration{0, 0, 0, 10 * s},
	}, {
		name:  "periodic syncs",
		cfg:   RunnerConfig{MinSyncPeriod: s, SyncPeriod: 30 * s},
		steps: []step{adv(29 * s), adv(s), adv(30 * s)},
		want:  []time.Duration{30 * s, 60 * s},
	}, {
		name:  "a requested sync restarts the period",
		cfg:   RunnerConfig{SyncPeriod: 30 * s},
		steps: []step{adv(20 * s), req, adv(20 * s), adv(10 * s)},
		want:  []time.Duration{20 * s, 50 * s},
	}, {
		name:  "no periodic sync without a period",
		cfg:   RunnerConfig{MinSyncPeriod: s},
		steps: []step{adv(24 * time.Hour), req},
		want:  []time.Duration{24 * time.Hour},
	}, {
		name:  "no retry without a period",
		cfg:   RunnerConfig{},
		fail:  1,
		steps: []step{req, adv(time.Hour), req},
		want:  []time.Duration{0, time.Hour},
	}, {
		name:  "nothing runs before the gate opens",
		cfg:   RunnerConfig{MinSyncPeriod: s, SyncPeriod: 30 * s},
		gated: true,
		steps: []step{req, adv(30 * s), req, adv(30 * s), open, adv(30 * s)},
		want:  []time.Duration{60 * s, 90 * s},
	}, {
		name:  "a failed sync is retried after the retry period",
		cfg:   RunnerConfig{SyncPeriod: time.Minute, RetryPeriod: 5 * s},
		fail:  2,
		steps: []step{req, adv(5 * s), adv(5 * s), adv(5 * s), adv(55 * s)},
		want:  []time.Duration{0, 5 * s, 10 * s, 70 * s},
	}, {
		name:  "a failed sync is retried after the sync period by default",
		cfg:   RunnerConfig{SyncPeriod: time.Minute},
		fail:  1,
		steps: []step{req, adv(time.Minute)},
		want:  []time.Duration{0, time.Minute},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newRunnerHarness(t, tt.cfg, tt.gated)
				h.mu.Lock()
				h.fail = tt.fail
				h.mu.Unlock()
				for _, st := range tt.steps {
					switch {
					case st.request:
						h.request()
					case st.open:
						// What the tracker's OnChange does once both inputs
						// have synced.
						h.ready.Store(true)
						h.request()
					default:
						h.step(st.advance)
					}
				}
				if got := h.recorded(); !slices.Equal(got, tt.want) {
					t.Errorf("syncs ran at %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// A request made while a sync runs is coalesced with the others made then
// into one follow-up sync.
func TestRunnerCoalescesDuringSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newRunnerHarness(t, RunnerConfig{MinSyncPeriod: time.Second, SyncPeriod: time.Hour}, false)
		release := make(chan struct{})
		h.mu.Lock()
		h.block = release
		h.mu.Unlock()
		h.request() // the sync runs, and waits on release
		if got := h.recorded(); len(got) != 1 {
			t.Fatalf("syncs ran at %v, want one running", got)
		}
		for range 5 {
			h.r.Request()
		}
		close(release)
		synctest.Wait()
		h.step(time.Minute)
		if got, want := h.recorded(), []time.Duration{0, 0}; !slices.Equal(got, want) {
			t.Errorf("syncs ran at %v, want %v", got, want)
		}
	})
}
