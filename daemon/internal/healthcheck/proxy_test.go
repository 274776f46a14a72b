package healthcheck

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dualStack are the families of a node that serves both.
var dualStack = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// answerCounters returns counters of /healthz and /livez answers by code.
func answerCounters() (healthz, livez *prometheus.CounterVec) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "healthz_total"}, []string{"code"}),
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "livez_total"}, []string{"code"})
}

// serveJSON serves one request and decodes the answer.
func serveJSON(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	return rec.Code, body
}

// The syncs' health as kube-proxy's ProxyHealthServer computes it: a
// change waiting for two sync periods makes the daemon unhealthy, whether
// or not periodic syncs run.
func TestHealthSyncs(t *testing.T) {
	const period = 30 * time.Second
	tests := []struct {
		name  string
		steps func(h *ProxyHealth, c *fakeClock)
		want  bool
	}{
		{"not started", func(h *ProxyHealth, c *fakeClock) { c.advance(10 * period) }, true},
		{"idle", func(h *ProxyHealth, c *fakeClock) { h.Updated(); c.advance(10 * period) }, true},
		{"change waiting", func(h *ProxyHealth, c *fakeClock) { h.Updated(); h.Queued(); c.advance(2*period - time.Second) }, true},
		{"change waited too long", func(h *ProxyHealth, c *fakeClock) { h.Updated(); h.Queued(); c.advance(2 * period) }, false},
		{"oldest change counts", func(h *ProxyHealth, c *fakeClock) {
			h.Updated()
			h.Queued()
			c.advance(period)
			h.Queued()
			c.advance(period)
		}, false},
		{"change programmed", func(h *ProxyHealth, c *fakeClock) {
			h.Updated()
			h.Queued()
			c.advance(3 * period)
			h.Updated()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1e9, 0)}
			healthz, livez := answerCounters()
			h := NewProxyHealth(period, c.now, false, dualStack, healthz, livez)
			tt.steps(h, c)
			code := map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[tt.want]
			for _, p := range []struct {
				path    string
				handler http.Handler
			}{{"/healthz", h.HealthzHandler()}, {"/livez", h.LivezHandler()}} {
				got, body := serveJSON(t, p.handler, p.path)
				if got != code || body["healthy"] != tt.want {
					t.Errorf("%s answered %d %v, want %d healthy=%v", p.path, got, body, code, tt.want)
				}
			}
			if n := testutil.ToFloat64(healthz.WithLabelValues(strconv.Itoa(code))); n != 1 {
				t.Errorf("kubeproxy_proxy_healthz_total{code=%d} = %v, want 1", code, n)
			}
			if n := testutil.ToFloat64(livez.WithLabelValues(strconv.Itoa(code))); n != 1 {
				t.Errorf("kubeproxy_proxy_livez_total{code=%d} = %v, want 1", code, n)
			}
		})
	}
}

// /healthz answers 503 for a node that is going away (deleted, or tainted
// by the cluster autoscaler) and, with the API server as the source, for
// a Node not yet seen; /livez ignores the node. Field names are
// kube-proxy's.
func TestHealthNodeEligible(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name         string
		nodeRequired bool
		node         *v1.Node
		want         bool
	}{
		{"node", true, &v1.Node{}, true},
		{"no node yet", true, nil, false},
		{"no node in the manifests", false, nil, true},
		{"being deleted", true, &v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"to be deleted by the autoscaler", true, &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "other", Effect: v1.TaintEffectNoSchedule},
			{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: v1.TaintEffectNoSchedule},
		}}}, false},
		{"other taints", true, &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule}}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1e9, 0)}
			healthz, livez := answerCounters()
			h := NewProxyHealth(time.Minute, c.now, tt.nodeRequired, dualStack, healthz, livez)
			h.Updated()
			h.SetNode(tt.node)
			code, body := serveJSON(t, h.HealthzHandler(), "/healthz")
			wantCode := map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[tt.want]
			if code != wantCode || body["nodeEligible"] != tt.want || body["healthy"] != true {
				t.Errorf("/healthz answered %d %v, want %d nodeEligible=%v healthy=true", code, body, wantCode, tt.want)
			}
			for _, f := range []string{"lastUpdated", "currentTime", "status"} {
				if _, ok := body[f]; !ok {
					t.Errorf("/healthz lacks %q: %v", f, body)
				}
			}
			if st, _ := body["status"].(map[string]any); st["IPv4"] == nil || st["IPv6"] == nil {
				t.Errorf("/healthz status per family: %v", body["status"])
			}
			code, body = serveJSON(t, h.LivezHandler(), "/livez")
			if _, ok := body["nodeEligible"]; code != http.StatusOK || ok {
				t.Errorf("/livez answered %d %v, want 200 without nodeEligible", code, body)
			}
		})
	}
}

// /healthz and /livez list the families the daemon serves, as kube-proxy
// lists the families whose proxier runs: IPv4 alone on a kernel without
// IPv6. Before the first sync they list none.
func TestHealthServedFamilies(t *testing.T) {
	for _, families := range [][]v1.IPFamily{{v1.IPv4Protocol}, dualStack} {
		c := &fakeClock{t: time.Unix(1e9, 0)}
		healthz, livez := answerCounters()
		h := NewProxyHealth(time.Minute, c.now, false, families, healthz, livez)
		for _, p := range []struct {
			path    string
			handler http.Handler
		}{{"/healthz", h.HealthzHandler()}, {"/livez", h.LivezHandler()}} {
			if _, body := serveJSON(t, p.handler, p.path); body["status"] != nil {
				t.Errorf("%v: %s before the first sync: status %v, want none", families, p.path, body["status"])
			}
		}
		h.Updated()
		for _, p := range []struct {
			path    string
			handler http.Handler
		}{{"/healthz", h.HealthzHandler()}, {"/livez", h.LivezHandler()}} {
			_, body := serveJSON(t, p.handler, p.path)
			st, _ := body["status"].(map[string]any)
			if len(st) != len(families) {
				t.Errorf("%v: %s status %v, want one entry per family", families, p.path, body["status"])
			}
			for _, f := range families {
				if fh, _ := st[string(f)].(map[string]any); fh["healthy"] != true || fh["lastUpdated"] == nil {
					t.Errorf("%v: %s status of %s: %v", families, p.path, f, st[string(f)])
				}
			}
		}
	}
}
