package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// health tracks whether syncs keep up, for /healthz and /livez: the
// daemon is unhealthy when no sync has ended for twice the sync period
// (the runner syncs at least once a period), or when a change has waited
// that long for one.
type health struct {
	now     func() time.Time
	timeout time.Duration

	mu      sync.Mutex
	started time.Time
	synced  time.Time
	queued  time.Time
}

func newHealth(syncPeriod time.Duration, now func() time.Time) *health {
	return &health{now: now, timeout: 2 * syncPeriod, started: now()}
}

// queue records a change waiting for a sync.
func (h *health) queue() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.queued.After(h.synced) {
		h.queued = h.now()
	}
}

// sync records a sync's end.
func (h *health) sync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = h.now()
}

// healthResponse is what /healthz answers, as kube-proxy does.
type healthResponse struct {
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	NodeHealthy bool      `json:"nodeHealthy"`
}

func (h *health) check() healthResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	last := h.synced
	if last.IsZero() {
		last = h.started
	}
	stalled := now.Sub(last) > h.timeout
	waiting := h.queued.After(h.synced) && now.Sub(h.queued) > h.timeout
	return healthResponse{LastUpdated: h.synced, CurrentTime: now, NodeHealthy: !stalled && !waiting}
}

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r := h.check()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !r.NodeHealthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(r)
}
