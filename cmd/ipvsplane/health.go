package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// health tracks whether syncs keep up, for /healthz and /livez. The runner
// syncs at least once a sync period, so the daemon is unhealthy when no
// sync has ended for twice that (counting from its start before the first
// sync): the syncs are stuck, or keep failing.
type health struct {
	now     func() time.Time
	timeout time.Duration

	mu      sync.Mutex
	started time.Time
	synced  time.Time
}

func newHealth(syncPeriod time.Duration, now func() time.Time) *health {
	return &health{now: now, timeout: 2 * syncPeriod, started: now()}
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
	return healthResponse{LastUpdated: h.synced, CurrentTime: now, NodeHealthy: now.Sub(last) <= h.timeout}
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
