package metrics

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner/everyop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// The metrics carry kube-proxy's names and labels (ip_family included)
// where they mean the same.
func TestMetricNames(t *testing.T) {
	m := New()
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
	m.ReplaceServices("node-a", nil)
	m.observe(&dataplane.Result{Plan: &plan.Plan{}, Flows: dataplane.FlowCleanup{Ran: inet.PerFamily[bool]{true, false}, Deleted: inet.PerFamily[int]{3, 0}}})
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
		"ipvsplane_plan_panics_total":                                nil,
		"ipvsplane_sync_operations":                                  nil,
		"ipvsplane_netlink_errors_total":                             {"op"},
		"ipvsplane_invalid_objects_total":                            nil,
		"ipvsplane_left_out_service_ports":                           nil,
		"ipvsplane_service_ports":                                    nil,
		"ipvsplane_scheduler_fallbacks":                              nil,
		"ipvsplane_ignored_service_settings":                         nil,
		"go_goroutines":                                              nil,
		"go_gc_heap_live_bytes":                                      nil,
		"go_gc_gomemlimit_bytes":                                     nil,
		"go_memory_classes_heap_objects_bytes":                       nil,
		"go_cpu_classes_gc_total_cpu_seconds_total":                  nil,
		"go_cpu_classes_total_cpu_seconds_total":                     nil,
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
			ServeProfiles(mux)
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
	kp := &kubeproxy.KubeProxyConfiguration{IPVS: kubeproxy.KubeProxyIPVSConfiguration{Scheduler: "wrr"}}
	kp.APIVersion, kp.Kind = "kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration"
	ServeKubeProxyPages(mux, kp)
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
	m := New()
	vk := plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.1"), Protocol: inet.TCP, Port: 80}
	add := plan.AddVirtual{Virtual: plan.VirtualServer{VirtualKey: vk}}
	m.observe(&dataplane.Result{
		Plan:   plan.New(add, plan.Bind{Addr: vk.Addr}),
		Errors: []error{&dataplane.OpError{Op: add, Err: errors.New("boom")}, &model.FieldError{}},
		Flows:  dataplane.FlowCleanup{Ran: inet.PerFamily[bool]{false, true}, Deleted: inet.PerFamily[int]{0, 2}},
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
	m := New()
	name := model.ServicePortName{Namespace: "demo", Name: "web"}
	m.observe(&dataplane.Result{Plan: &plan.Plan{}, Errors: []error{
		&model.SchedulerError{Service: name, Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler},
		&model.SchedulerError{Service: name, Scheduler: "twos", Fallback: "rr", Err: dataplane.ErrSchedulerNotSupported},
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

// The last-queued time moves for the families a change concerns among the
// node's: an IPv6 slice's change leaves IPv4's alone, and a node without
// IPv6 has no IPv6 series.
func TestSetQueued(t *testing.T) {
	at := time.Unix(1000, 0)
	m := New()
	m.SetQueued(inet.PerFamily[bool]{true, true}, at)
	m.SetQueued(inet.PerFamily[bool]{false, true}, at.Add(time.Second))
	if v4, v6 := testutil.ToFloat64(m.lastQueued.WithLabelValues("IPv4")), testutil.ToFloat64(m.lastQueued.WithLabelValues("IPv6")); v4 != 1000 || v6 != 1001 {
		t.Errorf("last queued IPv4 %v, IPv6 %v; want 1000, 1001", v4, v6)
	}
	single := New().ForFamilies([]inet.Family{inet.IPv4})
	single.SetQueued(inet.PerFamily[bool]{true, true}, at)
	if n := testutil.CollectAndCount(single.lastQueued); n != 1 || testutil.ToFloat64(single.lastQueued.WithLabelValues("IPv4")) != 1000 {
		t.Errorf("single-stack: %d series, want IPv4's alone", n)
	}
}

// ipvsplane_build_info is 1 with the build's labels, as kube-proxy's
// kubernetes_build_info.
func TestBuildInfoMetric(t *testing.T) {
	m := New().SetBuild(Build{Version: "v9.8.7", Revision: "abc", GoVersion: "go1.99.1", Compiler: "gc", Platform: "linux/amd64"})
	want := `# HELP ipvsplane_build_info A metric with a constant '1' value labeled by the version, commit, Go version, compiler and platform ipvsplane was built with.
# TYPE ipvsplane_build_info gauge
ipvsplane_build_info{compiler="gc",go_version="go1.99.1",platform="linux/amd64",revision="abc",version="v9.8.7"} 1
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want), "ipvsplane_build_info"); err != nil {
		t.Error(err)
	}
}

// A sync is timed as full or partial; one whose rules failed sets no
// last sync time and no programming latency, as kube-proxy's.
func TestObserveSync(t *testing.T) {
	m := New()
	end := time.Unix(1000, 0)
	m.ObserveSync(Sync{Result: &dataplane.Result{Full: true, Plan: &plan.Plan{}}, Took: time.Second, End: end,
		ServicesPending: 2, ServicePorts: 7, TriggerTimes: inet.PerFamily[[]time.Time]{{end.Add(-3 * time.Second)}, nil},
		Arrivals: []time.Time{end.Add(-3 * time.Millisecond), end.Add(-time.Millisecond)}})
	m.ObserveSync(Sync{Result: &dataplane.Result{Plan: &plan.Plan{}, RulesFailed: true}, Took: time.Second, End: end.Add(time.Minute),
		TriggerTimes: inet.PerFamily[[]time.Time]{{end}, {end}}, Arrivals: []time.Time{end}})
	want := `
# HELP ipvsplane_change_programming_duration_seconds From a Service or EndpointSlice change reaching ipvsplane to the end of the sync that programmed it: the proxy's part of kubeproxy_network_programming_duration_seconds.
# TYPE ipvsplane_change_programming_duration_seconds histogram
ipvsplane_change_programming_duration_seconds_bucket{le="0.001"} 1
ipvsplane_change_programming_duration_seconds_bucket{le="0.002"} 1
ipvsplane_change_programming_duration_seconds_bucket{le="0.004"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.008"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.016"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.032"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.064"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.128"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.256"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="0.512"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="1.024"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="2.048"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="4.096"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="8.192"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="16.384"} 2
ipvsplane_change_programming_duration_seconds_bucket{le="+Inf"} 2
ipvsplane_change_programming_duration_seconds_sum 0.004
ipvsplane_change_programming_duration_seconds_count 2
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want), "ipvsplane_change_programming_duration_seconds"); err != nil {
		t.Errorf("the proxy's part of the latency (the failed sync's arrival not counted): %v", err)
	}
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{float64(testutil.CollectAndCount(m.fullSyncDuration)), 2, "full sync series"},
		{float64(testutil.CollectAndCount(m.partialSyncDuration)), 2, "partial sync series"},
		{testutil.ToFloat64(m.lastSync.WithLabelValues("IPv4")), 1000, "last sync"},
		{float64(testutil.CollectAndCount(m.programming)), 1, "programming latency series (IPv4's)"},
		{testutil.ToFloat64(m.servicesPending), 0, "services pending after the second sync"},
		{testutil.ToFloat64(m.servicePorts), 0, "service ports after the second sync"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}

// The configured sync period is served, for the alert on late syncs to
// measure against whatever the node's configuration says.
func TestSyncPeriod(t *testing.T) {
	m := New().SetSyncPeriod(45 * time.Second)
	if got := testutil.ToFloat64(m.syncPeriod); got != 45 {
		t.Errorf("ipvsplane_sync_period_seconds %v, want 45", got)
	}
	if n, err := testutil.GatherAndCount(m.registry, "ipvsplane_sync_period_seconds"); err != nil || n != 1 {
		t.Errorf("the registry serves %d ipvsplane_sync_period_seconds series: %v", n, err)
	}
}

// Every kind of operation has a name of its own in the op label: a kind
// opKind misses would be counted as "other".
func TestOpKindNamesEveryOperation(t *testing.T) {
	seen := map[string]plan.Op{}
	for _, op := range everyop.Ops() {
		kind := opKind(op)
		if kind == "other" {
			t.Errorf("opKind(%T) is %q: name the new kind of operation", op, kind)
		}
		if prev, ok := seen[kind]; ok {
			t.Errorf("opKind names both %T and %T %q", prev, op, kind)
		}
		seen[kind] = op
	}
}
