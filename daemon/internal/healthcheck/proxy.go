package healthcheck

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// toBeDeletedTaint is the taint the cluster autoscaler puts on a node it
// is about to delete; cloud load balancers drain a node by its /healthz.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxyHealth answers /healthz and /livez as kube-proxy does: the daemon is
// healthy unless a change has waited longer than twice the sync period to
// be programmed (stuck or failing syncs), and /healthz also asks that this
// node's Node be eligible: known, not being deleted, and without the
// autoscaler's to-be-deleted taint.
type ProxyHealth struct {
	now     func() time.Time
	timeout time.Duration
	// families are the IP families the daemon serves, which the answers
	// list as kube-proxy lists the families whose proxier runs.
	families []v1.IPFamily
	// nodeRequired makes an unknown Node ineligible, as for kube-proxy;
	// without it (manifests from files may hold no Node) a missing Node
	// is eligible.
	nodeRequired bool
	// codes count /healthz and /livez answers by status code.
	healthzCodes, livezCodes *prometheus.CounterVec

	mu          sync.Mutex
	lastUpdated time.Time
	// oldestQueued is when the oldest change not yet programmed came;
	// zero when none waits.
	oldestQueued time.Time
	node         *v1.Node
}

// NewProxyHealth returns the health of a daemon syncing every syncPeriod
// the IP families given, not yet started. nodeRequired makes an unknown
// Node ineligible; healthzCodes and livezCodes count the answers by
// status code.
func NewProxyHealth(syncPeriod time.Duration, now func() time.Time, nodeRequired bool, families []v1.IPFamily, healthzCodes, livezCodes *prometheus.CounterVec) *ProxyHealth {
	return &ProxyHealth{now: now, timeout: 2 * syncPeriod, nodeRequired: nodeRequired, families: families,
		healthzCodes: healthzCodes, livezCodes: livezCodes}
}

// Updated records that the kernel holds every change queued so far: at
// start (a sync that never succeeds must still turn the daemon unhealthy
// only after the timeout) and at each sync's end.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.now()
	h.oldestQueued = time.Time{}
}

// Queued records a change that a sync is to program.
func (h *ProxyHealth) Queued() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestQueued.IsZero() {
		h.oldestQueued = h.now()
	}
}

// SetNode records this node's Node object; nil when it was deleted.
func (h *ProxyHealth) SetNode(n *v1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.node = n
}

// familyHealth is one IP family's part of a healthResponse.
type familyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// healthResponse is what /healthz and /livez answer, kube-proxy's
// ProxyHealth field for field. One sync programs every family served, so
// all report the same.
type healthResponse struct {
	LastUpdated  time.Time                    `json:"lastUpdated"`
	CurrentTime  time.Time                    `json:"currentTime"`
	NodeEligible *bool                        `json:"nodeEligible,omitempty"`
	Healthy      bool                         `json:"healthy"`
	Status       map[v1.IPFamily]familyHealth `json:"status,omitempty"`
}

// check reports the syncs' health (without the node's eligibility).
func (h *ProxyHealth) check() healthResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	r := healthResponse{CurrentTime: now, Healthy: true, LastUpdated: h.lastUpdated}
	if h.lastUpdated.IsZero() {
		// Not started: kube-proxy knows no family yet, and is healthy.
		return r
	}
	if !h.oldestQueued.IsZero() && now.Sub(h.oldestQueued) >= h.timeout {
		r.Healthy = false
	}
	fh := familyHealth{LastUpdated: h.lastUpdated, Healthy: r.Healthy}
	r.Status = make(map[v1.IPFamily]familyHealth, len(h.families))
	for _, f := range h.families {
		r.Status[f] = fh
	}
	return r
}

// Healthy reports whether the syncs are healthy, without the node's
// eligibility: what the health-check node ports report as
// serviceProxyHealthy.
func (h *ProxyHealth) Healthy() bool { return h.check().Healthy }

// nodeEligible reports whether load balancers may send traffic to this
// node: its Node is known, not being deleted and not tainted by the
// cluster autoscaler for deletion.
func (h *ProxyHealth) nodeEligible() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.node == nil {
		return !h.nodeRequired
	}
	if h.node.DeletionTimestamp != nil {
		return false
	}
	for _, t := range h.node.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}

// HealthzHandler serves /healthz: the syncs' health and the node's
// eligibility.
func (h *ProxyHealth) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := h.check()
		eligible := h.nodeEligible()
		r.NodeEligible = &eligible
		h.answer(w, r, r.Healthy && eligible, h.healthzCodes)
	})
}

// LivezHandler serves /livez: the syncs' health only, without the node's
// eligibility (a node being drained is alive).
func (h *ProxyHealth) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r := h.check()
		h.answer(w, r, r.Healthy, h.livezCodes)
	})
}

func (h *ProxyHealth) answer(w http.ResponseWriter, r healthResponse, ok bool, codes *prometheus.CounterVec) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	} else {
		// As kube-proxy: a healthy answer's lastUpdated is now, as it
		// was when it meant the last run of the sync loop.
		r.LastUpdated = r.CurrentTime
	}
	codes.WithLabelValues(strconv.Itoa(code)).Inc()
	w.WriteHeader(code)
	body, _ := json.Marshal(r)
	w.Write(body)
}
