package main

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The metrics carry kube-proxy's names where they mean the same.
func TestMetricNames(t *testing.T) {
	m := newMetrics()
	m.operations.WithLabelValues("add_virtual")
	m.netlinkErrors.WithLabelValues("add_virtual")
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds",
		"kubeproxy_sync_full_proxy_rules_duration_seconds",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds",
		"kubeproxy_network_programming_duration_seconds",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
		"kubeproxy_sync_proxy_rules_service_changes_pending",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"ipvsplane_sync_operations_total",
		"ipvsplane_sync_failures_total",
		"ipvsplane_sync_operations",
		"ipvsplane_netlink_errors_total",
		"ipvsplane_invalid_objects_total",
		"ipvsplane_left_out_service_ports",
		"ipvsplane_service_ports",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no metric %s", want)
		}
	}
}

func TestMetricsObserve(t *testing.T) {
	m := newMetrics()
	vk := dataplane.VirtualKey{Addr: netip.MustParseAddr("10.96.0.1"), Protocol: dataplane.TCP, Port: 80}
	add := dataplane.AddVirtual{Virtual: dataplane.VirtualServer{VirtualKey: vk}}
	m.observe(&dataplane.Result{
		Plan:   &dataplane.Plan{Ops: []dataplane.Op{add, dataplane.Bind{Addr: vk.Addr}}},
		Errors: []error{&dataplane.OpError{Op: add, Err: errors.New("boom")}, &dataplane.FieldError{}},
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
		res := &dataplane.Result{Plan: &dataplane.Plan{}}
		if want > 0 {
			res.Errors = []error{&dataplane.FieldError{}}
		}
		m.observe(res)
		if got := testutil.ToFloat64(m.leftOut); got != want {
			t.Errorf("left-out service ports: %v, want %v", got, want)
		}
	}
}
