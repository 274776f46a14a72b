package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The metrics carry kube-proxy's names and labels (ip_family included)
// where they mean the same.
func TestMetricNames(t *testing.T) {
	m := newMetrics()
	m.operations.WithLabelValues("add_virtual")
	m.netlinkErrors.WithLabelValues("add_virtual")
	m.healthz.WithLabelValues("200")
	m.livez.WithLabelValues("200")
	m.ruleFailures.WithLabelValues("IPv4")
	for _, h := range []*prometheus.HistogramVec{m.syncDuration, m.fullSyncDuration, m.partialSyncDuration, m.programming} {
		m.observeFamilies(h, 1)
	}
	m.setFamilies(m.lastSync, 1)
	m.setFamilies(m.lastQueued, 1)
	m.observeNoLocal(noLocalTracker{})
	m.observe(&dataplane.Result{Plan: &plan.Plan{}, Flows: dataplane.FlowCleanup{Ran: [2]bool{true, false}, Deleted: [2]int{3, 0}}})
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string][]string{}
	for _, f := range families {
		var names []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
		labels[f.GetName()] = names
	}
	family := []string{"ip_family"}
	for name, want := range map[string][]string{
		"kubeproxy_sync_proxy_rules_duration_seconds":                family,
		"kubeproxy_sync_full_proxy_rules_duration_seconds":           family,
		"kubeproxy_sync_partial_proxy_rules_duration_seconds":        family,
		"kubeproxy_network_programming_duration_seconds":             family,
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          family,
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds":   family,
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": family,
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        {"ip_family", "traffic_policy"},
		"kubeproxy_proxy_healthz_total":                              {"code"},
		"kubeproxy_proxy_livez_total":                                {"code"},
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending":        nil,
		"kubeproxy_sync_proxy_rules_service_changes_pending":         nil,
		"kubeproxy_sync_proxy_rules_endpoint_changes_total":          nil,
		"kubeproxy_sync_proxy_rules_service_changes_total":           nil,
		"ipvsplane_sync_operations_total":                            {"op"},
		"ipvsplane_sync_failures_total":                              nil,
		"ipvsplane_sync_operations":                                  nil,
		"ipvsplane_netlink_errors_total":                             {"op"},
		"ipvsplane_invalid_objects_total":                            nil,
		"ipvsplane_left_out_service_ports":                           nil,
		"ipvsplane_service_ports":                                    nil,
		"ipvsplane_scheduler_fallbacks":                              nil,
		"ipvsplane_ignored_service_settings":                         nil,
		"go_goroutines":                                              nil,
		"process_resident_memory_bytes":                              nil,
	} {
		got, ok := labels[name]
		if !ok {
			t.Errorf("no metric %s", name)
		} else if !slices.Equal(got, want) {
			t.Errorf("%s: labels %v, want %v", name, got, want)
		}
	}
}

// --profiling serves Go's profiles; without it there are none.
func TestProfiles(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		mux := http.NewServeMux()
		if enabled {
			serveProfiles(mux)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/heap", nil))
		if got := rec.Code == 200; got != enabled {
			t.Errorf("profiling %v: /debug/pprof/heap answered %d", enabled, rec.Code)
		}
	}
}

// /proxyMode and /configz answer as kube-proxy's.
func TestKubeProxyPages(t *testing.T) {
	mux := http.NewServeMux()
	kp := defaultConfig()
	kp.IPVS.Scheduler = "wrr"
	serveKubeProxyPages(mux, kp)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/proxyMode", nil))
	if rec.Code != 200 || rec.Body.String() != "ipvs" {
		t.Errorf("/proxyMode: %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/configz", nil))
	var got map[string]struct {
		Kind string `json:"kind"`
		IPVS struct {
			Scheduler string `json:"scheduler"`
		} `json:"ipvs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("/configz: %v: %s", err, rec.Body)
	}
	if c := got["kubeproxy.config.k8s.io"]; c.Kind != "KubeProxyConfiguration" || c.IPVS.Scheduler != "wrr" {
		t.Errorf("/configz: %s", rec.Body)
	}
}

func TestMetricsObserve(t *testing.T) {
	m := newMetrics()
	vk := plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.1"), Protocol: model.TCP, Port: 80}
	add := plan.AddVirtual{Virtual: plan.VirtualServer{VirtualKey: vk}}
	m.observe(&dataplane.Result{
		Plan:   plan.New(add, plan.Bind{Addr: vk.Addr}),
		Errors: []error{&dataplane.OpError{Op: add, Err: errors.New("boom")}, &model.FieldError{}},
		Flows:  dataplane.FlowCleanup{Ran: [2]bool{false, true}, Deleted: [2]int{0, 2}},
	})
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.operations.WithLabelValues("add_virtual")), 1, "add_virtual operations"},
		{testutil.ToFloat64(m.operations.WithLabelValues("bind")), 1, "bind operations"},
		{testutil.ToFloat64(m.netlinkErrors.WithLabelValues("add_virtual")), 1, "add_virtual errors"},
		{testutil.ToFloat64(m.leftOut), 1, "left-out service ports"},
		{testutil.ToFloat64(m.flowsDeleted.WithLabelValues("IPv6")), 2, "IPv6 flows deleted"},
		{float64(testutil.CollectAndCount(m.flowCleanup)), 1, "cleanup durations (IPv6 only)"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if err := testutil.CollectAndCompare(m.opsPerSync, strings.NewReader(`
# HELP ipvsplane_sync_operations Kernel operations per sync.
# TYPE ipvsplane_sync_operations histogram
ipvsplane_sync_operations_bucket{le="1"} 0
ipvsplane_sync_operations_bucket{le="4"} 1
ipvsplane_sync_operations_bucket{le="16"} 1
ipvsplane_sync_operations_bucket{le="64"} 1
ipvsplane_sync_operations_bucket{le="256"} 1
ipvsplane_sync_operations_bucket{le="1024"} 1
ipvsplane_sync_operations_bucket{le="4096"} 1
ipvsplane_sync_operations_bucket{le="16384"} 1
ipvsplane_sync_operations_bucket{le="65536"} 1
ipvsplane_sync_operations_bucket{le="262144"} 1
ipvsplane_sync_operations_bucket{le="+Inf"} 1
ipvsplane_sync_operations_sum 2
ipvsplane_sync_operations_count 1
`)); err != nil {
		t.Error(err)
	}
	// The next syncs report the same port left out, then none.
	for _, want := range []float64{1, 0} {
		res := &dataplane.Result{Plan: &plan.Plan{}}
		if want > 0 {
			res.Errors = []error{&model.FieldError{}}
		}
		m.observe(res)
		if got := testutil.ToFloat64(m.leftOut); got != want {
			t.Errorf("left-out service ports: %v, want %v", got, want)
		}
	}
}

// Service ports programmed with the node's scheduler, or without a
// setting, are counted apart from those left out, while they last.
func TestMetricsSchedulerFallbacks(t *testing.T) {
	m := newMetrics()
	name := model.ServicePortName{Namespace: "demo", Name: "web"}
	m.observe(&dataplane.Result{Plan: &plan.Plan{}, Errors: []error{
		&model.SchedulerError{Service: name, Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler},
		&model.SchedulerError{Service: name, Scheduler: "twos", Fallback: "rr", Err: dataplane.ErrNoScheduler},
		&model.SettingError{Service: name, Field: "schedulerFlags", Value: "sh-port"},
	}})
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{testutil.ToFloat64(m.schedulerFallbacks), 2, "scheduler fallbacks"},
		{testutil.ToFloat64(m.ignoredSettings), 1, "ignored settings"},
		{testutil.ToFloat64(m.leftOut), 0, "left-out service ports"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	m.observe(&dataplane.Result{Plan: &plan.Plan{}})
	if got := testutil.ToFloat64(m.schedulerFallbacks); got != 0 {
		t.Errorf("scheduler fallbacks after they went: %v", got)
	}
}

// Each family records what it did, and only the node's families have
// series, as kube-proxy's per-family proxiers: on a dual-stack node an
// IPv4 slice's change is IPv4's programming latency alone and an IPv6
// one's IPv6's; a node whose kernel has no IPv6 has no IPv6 series at all.
func TestMetricsPerFamily(t *testing.T) {
	svc := &v1.Service{}
	svc.Namespace, svc.Name = "demo", "web"
	svc.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80}}
	slice := func(name string, family discoveryv1.AddressType, addr string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{AddressType: family}
		s.Namespace, s.Name, s.Labels = "demo", name, map[string]string{discoveryv1.LabelServiceName: "web"}
		portName, port := "http", int32(8080)
		s.Ports = []discoveryv1.EndpointPort{{Name: &portName, Port: &port}}
		s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{addr}}}
		return s
	}
	for _, tt := range []struct {
		name     string
		ipv6     bool
		families []string
	}{{"dual-stack", true, []string{"IPv4", "IPv6"}}, {"IPv4 only", false, []string{"IPv4"}}} {
		t.Run(tt.name, func(t *testing.T) {
			m := newMetrics().forFamilies(tt.ipv6)
			k := &fakeKernel{problems: []error{&dataplane.OpError{Op: plan.ReplaceRules{}, Err: errors.New("refused")}}}
			d := &daemon{log: zap.NewNop(), kernel: k, metrics: m, health: healthcheck.NewProxyHealth(30*time.Second, time.Now, false, m.healthz, m.livez),
				now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})}
			d.hc = testServiceServers("node-a", nil)
			defer d.hc.Close(context.Background())
			d.tracker.SetService(svc)
			now := time.Now()
			d.tracker.SetEndpointSlice(slice("web-4", discoveryv1.AddressTypeIPv4, "10.244.1.1"), now.Add(-time.Second))
			d.tracker.SetEndpointSlice(slice("web-6a", discoveryv1.AddressTypeIPv6, "fd00:244::1"), now.Add(-2*time.Second))
			d.tracker.SetEndpointSlice(slice("web-6b", discoveryv1.AddressTypeIPv6, "fd00:244::2"), now.Add(-3*time.Second))
			d.sync(context.Background())

			for name, vec := range map[string]prometheus.Collector{
				"sync duration": m.syncDuration, "last sync": m.lastSync,
				"rule failures": m.ruleFailures, "no local endpoints": m.noLocalEndpoints,
			} {
				if got := seriesFamilies(t, vec); !slices.Equal(got, tt.families) {
					t.Errorf("%s: series of %v, want %v", name, got, tt.families)
				}
			}
			if got := seriesFamilies(t, m.programming); !slices.Equal(got, tt.families) {
				t.Errorf("programming latency: series of %v, want %v", got, tt.families)
			}
			counts := histogramCounts(t, m.programming)
			if counts["IPv4"] != 1 || (tt.ipv6 && counts["IPv6"] != 2) {
				t.Errorf("programming latency observations %v, want IPv4 1 and (dual-stack) IPv6 2", counts)
			}
			if got := testutil.ToFloat64(m.ruleFailures.WithLabelValues("IPv4")); got != 1 {
				t.Errorf("IPv4 rule failures %v, want 1", got)
			}
		})
	}
}

// seriesFamilies returns the ip_family values of a collector's series,
// sorted and without repeats.
func seriesFamilies(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "ip_family" && !slices.Contains(out, l.GetValue()) {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// histogramCounts returns each family's observation count.
func histogramCounts(t *testing.T, h *prometheus.HistogramVec) map[string]uint64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "ip_family" {
					out[l.GetValue()] = metric.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// The last-queued time moves for the families a change concerns among the
// node's: an IPv6 slice's change leaves IPv4's alone, and a node without
// IPv6 has no IPv6 series.
func TestSetQueued(t *testing.T) {
	at := time.Unix(1000, 0)
	m := newMetrics()
	m.setQueued([2]bool{true, true}, at)
	m.setQueued([2]bool{false, true}, at.Add(time.Second))
	if v4, v6 := testutil.ToFloat64(m.lastQueued.WithLabelValues("IPv4")), testutil.ToFloat64(m.lastQueued.WithLabelValues("IPv6")); v4 != 1000 || v6 != 1001 {
		t.Errorf("last queued IPv4 %v, IPv6 %v; want 1000, 1001", v4, v6)
	}
	single := newMetrics().forFamilies(false)
	single.setQueued([2]bool{true, true}, at)
	if got := seriesFamilies(t, single.lastQueued); !slices.Equal(got, []string{"IPv4"}) {
		t.Errorf("single-stack series %v, want IPv4's", got)
	}
}

// ipvsplane_build_info is 1 with the build's labels, as kube-proxy's
// kubernetes_build_info.
func TestBuildInfoMetric(t *testing.T) {
	m := newMetrics().setBuild(buildInfo{Version: "v9.8.7", Revision: "abc", GoVersion: "go1.99.1", Compiler: "gc", Platform: "linux/amd64"})
	want := `# HELP ipvsplane_build_info A metric with a constant '1' value labeled by the version, commit, Go version, compiler and platform ipvsplane was built with.
# TYPE ipvsplane_build_info gauge
ipvsplane_build_info{compiler="gc",go_version="go1.99.1",platform="linux/amd64",revision="abc",version="v9.8.7"} 1
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want), "ipvsplane_build_info"); err != nil {
		t.Error(err)
	}
}
