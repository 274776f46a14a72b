// Package metrics holds the daemon's Prometheus metrics: kube-proxy's
// names and labels where they mean the same, ipvsplane_* for the rest,
// fed by the syncs (ObserveSync) and the watch of the objects (SetQueued,
// SetPending, InvalidObject), and the pages kube-proxy's metrics server
// serves beside them.
package metrics

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"regexp"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/conntracksettings"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// Metrics are the daemon's Prometheus metrics: kube-proxy's names where
// they mean the same, ipvsplane_* for the rest. They live in their own
// registry, so that tests can make as many as they like.
type Metrics struct {
	registry *prometheus.Registry

	// families are the ip_family values the node's syncs record under:
	// kube-proxy runs a proxier for each family the kernel supports, and
	// each records its own series. One sync programs every family, so a
	// sync's duration and time are recorded under each; what concerns one
	// family (an EndpointSlice's programming latency, services without a
	// local endpoint) under its own only.
	families []string

	// These carry kube-proxy's ip_family label.
	syncDuration        *prometheus.HistogramVec
	fullSyncDuration    *prometheus.HistogramVec
	partialSyncDuration *prometheus.HistogramVec
	programming         *prometheus.HistogramVec
	lastSync            *prometheus.GaugeVec
	lastQueued          *prometheus.GaugeVec
	noLocalEndpoints    *prometheus.GaugeVec
	ruleFailures        *prometheus.CounterVec
	flowCleanup         *prometheus.HistogramVec
	flowsDeleted        *prometheus.CounterVec
	endpointsPending    prometheus.Gauge
	servicesPending     prometheus.Gauge
	endpointChanges     prometheus.Counter
	serviceChanges      prometheus.Counter
	syncErrors          prometheus.Counter
	planPanics          prometheus.Counter

	// proxyLatency is the proxy's own part of programming, from a
	// change's arrival to the end of the sync that programmed it.
	proxyLatency prometheus.Histogram
	// prefillDuration times the start's prefills.
	prefillDuration prometheus.Histogram

	operations     *prometheus.CounterVec
	opsPerSync     prometheus.Histogram
	netlinkErrors  *prometheus.CounterVec
	invalidObjects prometheus.Counter
	leftOut        prometheus.Gauge
	servicePorts   prometheus.Gauge
	// schedulerFallbacks and ignoredSettings count the service ports
	// programmed without what they ask: their scheduler, a setting.
	schedulerFallbacks prometheus.Gauge
	ignoredSettings    prometheus.Gauge

	healthz, livez *prometheus.CounterVec

	// build is ipvsplane_build_info, set by SetBuild.
	build *prometheus.GaugeVec
	// syncPeriod is the configured period, which the alert on late syncs
	// measures against (SetSyncPeriod).
	syncPeriod prometheus.Gauge

	// rest is client-go's requests to the API server (ClientGoMetrics).
	rest *restClient

	// noLocal holds the service ports with Local policies and no local
	// endpoints, for noLocalEndpoints.
	noLocal noLocalTracker
}

// familyLabels returns the values of kube-proxy's ip_family label for
// families: inet spells them as Kubernetes does.
func familyLabels(families ...inet.Family) []string {
	labels := make([]string, len(families))
	for i, f := range families {
		labels[i] = f.String()
	}
	return labels
}

// New returns the metrics of a node that runs both families, in a
// registry of their own (see ForFamilies).
func New() *Metrics {
	family := []string{"ip_family"}
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Metrics{
		families: familyLabels(inet.IPv4, inet.IPv6), noLocal: noLocalTracker{}, rest: newRESTClient(),
		registry: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_proxy_rules_duration_seconds", Help: "How long a sync of the kernel state took.", Buckets: syncBuckets,
		}, family),
		fullSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_full_proxy_rules_duration_seconds", Help: "How long a full sync (that read the kernel) took.", Buckets: syncBuckets,
		}, family),
		partialSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds", Help: "How long an incremental sync took.", Buckets: syncBuckets,
		}, family),
		programming: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_network_programming_duration_seconds", Help: "From an endpoint change being triggered to its programming in the kernel.",
			Buckets: slices.Concat(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59),
				prometheus.LinearBuckets(60, 5, 12), prometheus.LinearBuckets(120, 30, 7)),
		}, family),
		// 1 ms to 16 s: the proxy's part is milliseconds when it keeps up,
		// where kube-proxy's buckets start at 250 ms.
		proxyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ipvsplane_change_programming_duration_seconds",
			Help:    "From a Service or EndpointSlice change reaching ipvsplane to the end of the sync that programmed it: the proxy's part of kubeproxy_network_programming_duration_seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		lastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds", Help: "When the last successful sync ended (Unix seconds).",
		}, family),
		lastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", Help: "When the last change that asks for a sync arrived (Unix seconds).",
		}, family),
		noLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total", Help: "Services with a Local traffic policy and endpoints, none of them on this node.",
		}, []string{"traffic_policy", "ip_family"}),
		ruleFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", Help: "Rule transactions (nftables, in ipvsplane) the kernel refused.",
		}, family),
		endpointsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending", Help: "Services with endpoint changes not yet synced.",
		}),
		servicesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_pending", Help: "Services with service changes not yet synced.",
		}),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_total", Help: "Endpoint changes synced.",
		}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_total", Help: "Service changes synced.",
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipvsplane_sync_failures_total", Help: "Syncs that could not read or program the kernel.",
		}),
		planPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipvsplane_plan_panics_total", Help: "Syncs whose planning panicked (a bug some input found); the service ports being planned are left out.",
		}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ipvsplane_sync_operations_total", Help: "Kernel operations carried out, by kind.",
		}, []string{"op"}),
		opsPerSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ipvsplane_sync_operations", Help: "Kernel operations per sync.", Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		prefillDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ipvsplane_prefill_duration_seconds", Help: "How long a prefill took: a round of kernel writes at the start, while Services and EndpointSlices are still being listed, that adds what is listed so far and changes nothing else. The first sync follows the listing.",
			Buckets: syncBuckets,
		}),
		netlinkErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ipvsplane_netlink_errors_total", Help: "Kernel operations that failed, by kind.",
		}, []string{"op"}),
		invalidObjects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ipvsplane_invalid_objects_total", Help: "Service, EndpointSlice and Node versions skipped as invalid, or read with invalid entries left out, when they arrived.",
		}),
		leftOut: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ipvsplane_left_out_service_ports", Help: "Service ports the last sync left out as invalid, and claims on a virtual server another service port has (the rest of such a port is programmed).",
		}),
		servicePorts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ipvsplane_service_ports", Help: "Service ports in the desired state.",
		}),
		schedulerFallbacks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ipvsplane_scheduler_fallbacks", Help: "Service ports whose IPVS scheduler is unknown or missing from the kernel, programmed with the node's scheduler instead.",
		}),
		ignoredSettings: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ipvsplane_ignored_service_settings", Help: "Settings of service ports that the last sync ignored: unreadable annotations, scheduler flags the scheduler does not read.",
		}),
		healthz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_healthz_total", Help: "/healthz answers, by HTTP status code.",
		}, []string{"code"}),
		livez: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_livez_total", Help: "/livez answers, by HTTP status code.",
		}, []string{"code"}),
		flowCleanup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_conntrack_reconciler_sync_duration_seconds", Help: "How long a conntrack reconciliation took, once per sync and family it ran in.", Buckets: syncBuckets,
		}, family),
		flowsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_conntrack_reconciler_deleted_entries_total", Help: "Stale conntrack flows deleted.",
		}, family),
		// kube-proxy's kubernetes_build_info has git_version, git_commit,
		// go_version, compiler and platform (and Kubernetes' major, minor,
		// tree state and build date); these are the same under
		// ipvsplane's names.
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ipvsplane_build_info", Help: "A metric with a constant '1' value labeled by the version, commit, Go version, compiler and platform ipvsplane was built with.",
		}, []string{"version", "revision", "go_version", "compiler", "platform"}),
		syncPeriod: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ipvsplane_sync_period_seconds", Help: "The configured sync period (ipvs.syncPeriod): with nothing changing, a sync starts at least this often.",
		}),
	}
	m.registry.MustRegister(m.healthz, m.livez, m.noLocalEndpoints, m.ruleFailures, m.flowCleanup, m.flowsDeleted,
		m.syncDuration, m.fullSyncDuration, m.partialSyncDuration, m.programming, m.proxyLatency, m.prefillDuration,
		m.lastSync, m.lastQueued, m.endpointsPending, m.servicesPending, m.endpointChanges, m.serviceChanges,
		m.syncErrors, m.planPanics, m.operations, m.opsPerSync, m.netlinkErrors, m.invalidObjects, m.leftOut, m.servicePorts,
		m.schedulerFallbacks, m.ignoredSettings, m.build, conntracksettings.NewCollector(conntracksettings.HostPaths().ProcSys),
		goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(m.syncPeriod)
	m.registry.MustRegister(m.rest.collectors()...)
	return m
}

// goCollector exports the Go runtime's usual metrics and some of its
// runtime/metrics: go_gc_heap_live_bytes, the heap the last garbage
// collection found live (the measure of a leak that the heap's and RSS's
// growth between collections does not blur); the soft memory limit the
// daemon sets (go_gc_gomemlimit_bytes) and the memory classes it is set
// from; and the CPU the collector takes (go_cpu_classes_gc_total_cpu_seconds_total
// beside go_cpu_classes_total_cpu_seconds_total), which shows a limit set
// too tight.
func goCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(
			`^(/gc/heap/live:bytes|/gc/gomemlimit:bytes|/memory/classes/.*|/cpu/classes/(gc/)?total:cpu-seconds)$`)}))
}

// Build is what ipvsplane was built from and with.
type Build struct {
	Version, Revision, GoVersion, Compiler, Platform string
}

// SetBuild sets ipvsplane_build_info to b's labels.
func (m *Metrics) SetBuild(b Build) *Metrics {
	m.build.Reset()
	m.build.WithLabelValues(b.Version, b.Revision, b.GoVersion, b.Compiler, b.Platform).Set(1)
	return m
}

// SetSyncPeriod records the configured sync period, and returns m.
func (m *Metrics) SetSyncPeriod(d time.Duration) *Metrics {
	m.syncPeriod.Set(d.Seconds())
	return m
}

// Sync is what a successful sync reports.
type Sync struct {
	Result *dataplane.Result
	Took   time.Duration
	End    time.Time
	// ServiceChanges and EndpointChanges are the changes it took;
	// ServicesPending and EndpointsPending, those waiting after it.
	ServiceChanges, EndpointChanges   int
	ServicesPending, EndpointsPending int
	// ServicePorts are the service ports of the desired state.
	ServicePorts int
	// TriggerTimes are the trigger times of the endpoint changes it
	// programmed, per family (watcher.Update.TriggerTimes).
	TriggerTimes inet.PerFamily[[]time.Time]
	// Arrivals are when the changes it programmed reached the daemon
	// (watcher.Update.Arrivals).
	Arrivals []time.Time
}

// ObserveSync records a successful sync.
func (m *Metrics) ObserveSync(s Sync) {
	took := s.Took.Seconds()
	m.observeFamilies(m.syncDuration, took)
	if s.Result.Full {
		m.observeFamilies(m.fullSyncDuration, took)
	} else {
		m.observeFamilies(m.partialSyncDuration, took)
	}
	m.serviceChanges.Add(float64(s.ServiceChanges))
	m.endpointChanges.Add(float64(s.EndpointChanges))
	m.SetPending(s.ServicesPending, s.EndpointsPending)
	m.servicePorts.Set(float64(s.ServicePorts))
	m.observe(s.Result)
	if s.Result.RulesFailed {
		// As kube-proxy, whose sync returns before these when its rules
		// fail: the node is not programmed, nor is the change.
		return
	}
	m.setFamilies(m.lastSync, float64(s.End.UnixNano())/1e9)
	for _, at := range s.Arrivals {
		m.proxyLatency.Observe(s.End.Sub(at).Seconds())
	}
	// Each family's EndpointSlice changes count for that family only.
	for _, fam := range inet.Families() {
		f := fam.String()
		if !m.runs(f) {
			continue
		}
		for _, t := range s.TriggerTimes.Get(fam) {
			if !t.IsZero() {
				m.programming.WithLabelValues(f).Observe(s.End.Sub(t).Seconds())
			}
		}
	}
}

// SyncFailed counts a sync that could not read or program the kernel.
func (m *Metrics) SyncFailed() { m.syncErrors.Inc() }

// PlanPanicked counts a sync whose planning panicked.
func (m *Metrics) PlanPanicked() { m.planPanics.Inc() }

// SetPending sets the services with changes not yet synced.
func (m *Metrics) SetPending(services, endpoints int) {
	m.servicesPending.Set(float64(services))
	m.endpointsPending.Set(float64(endpoints))
}

// Started records the daemon's start as the time a change was last
// queued, as kube-proxy's sync loop does.
func (m *Metrics) Started(at time.Time) {
	m.setFamilies(m.lastQueued, float64(at.UnixNano())/1e9)
}

// InvalidObject counts a Service, EndpointSlice or Node version skipped
// as invalid, or read with invalid entries left out.
func (m *Metrics) InvalidObject() { m.invalidObjects.Inc() }

// ReplaceServices follows the desired state whole, after a full sync,
// for the services without local endpoints on node.
func (m *Metrics) ReplaceServices(node string, services []model.ServicePort) {
	m.noLocal = noLocalTracker{}
	for i := range services {
		m.noLocal.set(services[i].Name, &services[i], node)
	}
	m.observeNoLocal(m.noLocal)
}

// ApplyChanges follows an incremental sync's changes, for the services
// without local endpoints on node.
func (m *Metrics) ApplyChanges(node string, changes []model.Change) {
	for _, c := range changes {
		m.noLocal.set(c.Name, c.Port, node)
	}
	m.observeNoLocal(m.noLocal)
}

// observe records a sync's result.
func (m *Metrics) observe(res *dataplane.Result) {
	if res.Plan != nil {
		m.opsPerSync.Observe(float64(res.Plan.Len()))
		m.countOperations(res.Plan)
	}
	for _, fam := range inet.Families() {
		if f := fam.String(); res.Flows.Ran.Get(fam) && m.runs(f) {
			m.flowCleanup.WithLabelValues(f).Observe(res.Flows.Took.Get(fam).Seconds())
			m.flowsDeleted.WithLabelValues(f).Add(float64(res.Flows.Deleted.Get(fam)))
		}
	}
	m.observeErrors(res.Errors)
}

// countOperations counts a plan's operations by kind.
func (m *Metrics) countOperations(p *plan.Plan) {
	for op := range p.All() {
		// One operation adds all of a virtual server's new real
		// servers; the kernel sees one request for each.
		n := 1
		if o, ok := op.(plan.AddReals); ok {
			n = len(o.Reals)
		}
		m.operations.WithLabelValues(opKind(op)).Add(float64(n))
	}
}

// ObservePrefill records a prefill (see ipvsplane_prefill_duration_seconds)
// that took `took`; res is nil when it could not read the kernel. Its
// operations are counted with the syncs'; it is not a sync, and sets none
// of kubeproxy_sync_proxy_rules_*.
func (m *Metrics) ObservePrefill(res *dataplane.Result, took time.Duration) {
	m.prefillDuration.Observe(took.Seconds())
	if res != nil && res.Plan != nil {
		m.countOperations(res.Plan)
	}
}

// observeErrors counts a sync's errors. Every sync reports all the
// service ports it leaves out or programs without what they ask, not
// only the new ones: gauges, not counters.
func (m *Metrics) observeErrors(errs []error) {
	var leftOut, fallbacks, ignored int
	for _, err := range errs {
		var oe *dataplane.OpError
		switch {
		case errors.As(err, &oe):
			m.netlinkErrors.WithLabelValues(opKind(oe.Op)).Inc()
			// One transaction holds every family's rules: it fails
			// for each.
			if _, ok := oe.Op.(plan.ReplaceRules); ok {
				for _, f := range m.families {
					m.ruleFailures.WithLabelValues(f).Inc()
				}
			}
		case errors.As(err, new(*model.SchedulerError)):
			fallbacks++
		case errors.As(err, new(*model.SettingError)):
			ignored++
		default:
			leftOut++
		}
	}
	m.leftOut.Set(float64(leftOut))
	m.schedulerFallbacks.Set(float64(fallbacks))
	m.ignoredSettings.Set(float64(ignored))
}

// Registry is the metrics' registry, where other collectors of the
// daemon's go too.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// AnswerCounters are the counters of /healthz and /livez answers by
// status code (see healthcheck.NewProxyHealth).
func (m *Metrics) AnswerCounters() (healthz, livez *prometheus.CounterVec) { return m.healthz, m.livez }

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	// Uncompressed: the page is a few kilobytes, and a gzip writer costs
	// a megabyte of garbage per scrape.
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry, DisableCompression: true})
}

// opKind names an operation's kind for the metrics' op label.
func opKind(op plan.Op) string {
	switch op.(type) {
	case plan.CreateSet:
		return "create_set"
	case plan.AddEntries:
		return "add_entries"
	case plan.DelEntries:
		return "del_entries"
	case plan.ReplaceRules:
		return "replace_rules"
	case plan.AddVirtual:
		return "add_virtual"
	case plan.UpdateVirtual:
		return "update_virtual"
	case plan.DeleteVirtual:
		return "delete_virtual"
	case plan.AddReals:
		return "add_real"
	case plan.UpdateReal:
		return "update_real"
	case plan.DeleteReal:
		return "delete_real"
	case plan.Bind:
		return "bind"
	case plan.Unbind:
		return "unbind"
	case plan.ReconcileFlows:
		return "reconcile_conntrack"
	case plan.RemoveKubeProxyRules:
		return "remove_kube_proxy_rules"
	}
	return "other"
}

// ForFamilies limits the series to the node's families, as kube-proxy
// runs a proxier for IPv6 only where the kernel has it.
func (m *Metrics) ForFamilies(families []inet.Family) *Metrics {
	m.families = familyLabels(families...)
	return m
}

// SetQueued records when a change that asks for a sync arrived, under the
// families it concerns among the node's (see watcher.TrackerConfig.OnChange).
func (m *Metrics) SetQueued(families inet.PerFamily[bool], at time.Time) {
	for _, fam := range inet.Families() {
		if f := fam.String(); families.Get(fam) && m.runs(f) {
			m.lastQueued.WithLabelValues(f).Set(float64(at.UnixNano()) / 1e9)
		}
	}
}

// runs reports whether family f is one of the node's.
func (m *Metrics) runs(f string) bool { return slices.Contains(m.families, f) }

// observeFamilies records v under each of the node's families.
func (m *Metrics) observeFamilies(h *prometheus.HistogramVec, v float64) {
	for _, f := range m.families {
		h.WithLabelValues(f).Observe(v)
	}
}

// setFamilies sets g to v under each of the node's families.
func (m *Metrics) setFamilies(g *prometheus.GaugeVec, v float64) {
	for _, f := range m.families {
		g.WithLabelValues(f).Set(v)
	}
}

// ServeKubeProxyPages adds the pages kube-proxy serves beside /metrics:
// /proxyMode ("ipvs"), /configz (the configuration in use, as
// {"kubeproxy.config.k8s.io": KubeProxyConfiguration}) and /healthz
// ("ok" while the server runs).
func ServeKubeProxyPages(mux *http.ServeMux, kp *kubeproxy.KubeProxyConfiguration) {
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		io.WriteString(w, "ipvs")
	})
	configz, err := json.Marshal(map[string]any{"kubeproxy.config.k8s.io": kp})
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(configz)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		io.WriteString(w, "ok")
	})
}

// ServeProfiles serves Go's runtime profiles under /debug/pprof/, as
// kube-proxy does with --profiling: a CPU profile of a slow sync shows
// where its time goes.
func ServeProfiles(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
