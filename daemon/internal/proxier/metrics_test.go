package proxier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/inet"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

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
		served   []inet.Family
		families []string
	}{{"dual-stack", []inet.Family{inet.IPv4, inet.IPv6}, []string{"IPv4", "IPv6"}}, {"IPv4 only", []inet.Family{inet.IPv4}, []string{"IPv4"}}} {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New().ForFamilies(tt.served)
			p := newTestProxier(t, setup{metrics: m})
			p.tracker.SetService(svc)
			now := time.Now()
			p.tracker.SetEndpointSlice(slice("web-4", discoveryv1.AddressTypeIPv4, "10.244.1.1"), now.Add(-time.Second))
			p.tracker.SetEndpointSlice(slice("web-6a", discoveryv1.AddressTypeIPv6, "fd00:244::1"), now.Add(-2*time.Second))
			p.tracker.SetEndpointSlice(slice("web-6b", discoveryv1.AddressTypeIPv6, "fd00:244::2"), now.Add(-3*time.Second))
			p.listed(t)
			p.Sync(context.Background())
			const programming = "kubeproxy_network_programming_duration_seconds"

			for name, metric := range map[string]string{
				"sync duration": "kubeproxy_sync_proxy_rules_duration_seconds", "last sync": "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
				"no local endpoints": "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
			} {
				if got := seriesFamilies(t, m, metric); !slices.Equal(got, tt.families) {
					t.Errorf("%s: series of %v, want %v", name, got, tt.families)
				}
			}
			if got := seriesFamilies(t, m, programming); !slices.Equal(got, tt.families) {
				t.Errorf("programming latency: series of %v, want %v", got, tt.families)
			}
			counts := histogramCounts(t, m, programming)
			if counts["IPv4"] != 1 || (slices.Contains(tt.served, inet.IPv6) && counts["IPv6"] != 2) {
				t.Errorf("programming latency observations %v, want IPv4 1 and (dual-stack) IPv6 2", counts)
			}

			// A rule transaction the kernel refuses counts for each family.
			mb := metrics.New().ForFamilies(tt.served)
			broken := newTestProxier(t, setup{metrics: mb})
			broken.node.Rules.UnregisterChainType(nftables.TableFamilyIPv4, nftables.ChainTypeNAT)
			broken.listed(t)
			broken.Sync(context.Background())
			const failures = "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"
			if got := seriesFamilies(t, mb, failures); !slices.Equal(got, tt.families) {
				t.Errorf("rule failures: series of %v, want %v", got, tt.families)
			}
			if got := gatheredValue(t, mb, failures, "IPv4"); got != 1 {
				t.Errorf("IPv4 rule failures %v, want 1", got)
			}
		})
	}
}

// seriesFamilies returns the ip_family values of a metric's series,
// sorted and without repeats.
func seriesFamilies(t *testing.T, m *metrics.Metrics, name string) []string {
	t.Helper()
	var out []string
	for _, mf := range gather(t, m, name) {
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

// histogramCounts returns each family's observation count of a
// histogram.
func histogramCounts(t *testing.T, m *metrics.Metrics, name string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, mf := range gather(t, m, name) {
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

// gatheredValue returns the value of a gauge or a counter without labels,
// or of its series of family; 0 if it has none.
func gatheredValue(t *testing.T, m *metrics.Metrics, name string, family ...string) float64 {
	t.Helper()
	for _, mf := range gather(t, m, name) {
		for _, metric := range mf.GetMetric() {
			var fam []string
			for _, l := range metric.GetLabel() {
				if l.GetName() == "ip_family" {
					fam = append(fam, l.GetValue())
				}
			}
			if slices.Equal(fam, family) {
				return metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// gather returns what m's registry holds of the metric name.
func gather(t *testing.T, m *metrics.Metrics, name string) []*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() != name })
}
