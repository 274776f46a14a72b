package metrics

import (
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func noLocalEndpoint(addr, node string, ready, serving, terminating bool) model.Endpoint {
	return model.Endpoint{Addr: netip.MustParseAddr(addr), Port: 80, NodeName: node, Ready: ready, Serving: serving, Terminating: terminating}
}

// kubeproxy_sync_proxy_rules_no_local_endpoints_total counts services
// (not ports), per policy and family, whose Local policy finds endpoints
// in the cluster but none on this node.
func TestNoLocalEndpoints(t *testing.T) {
	port := func(ns, name, p string, internal, external model.TrafficPolicy, eps ...model.Endpoint) model.ServicePort {
		return model.ServicePort{Name: model.ServicePortName{Namespace: ns, Name: name, Port: p},
			InternalPolicy: internal, ExternalPolicy: external, Endpoints: eps}
	}
	L, C := model.PolicyLocal, model.PolicyCluster
	ports := []model.ServicePort{
		// Two ports of one service count once.
		port("a", "web", "http", L, C, noLocalEndpoint("10.0.0.1", "node-b", true, true, false)),
		port("a", "web", "https", L, C, noLocalEndpoint("10.0.0.1", "node-b", true, true, false)),
		// A local endpoint: not counted.
		port("a", "local", "", L, L, noLocalEndpoint("10.0.0.2", "node-a", true, true, false)),
		// No endpoints at all: not counted.
		port("a", "empty", "", L, L),
		// Only a remote serving-terminating endpoint counts as some.
		port("a", "lb", "", C, L, noLocalEndpoint("10.0.0.3", "node-b", false, true, true)),
		// A remote not-serving endpoint is none.
		port("a", "dead", "", C, L, noLocalEndpoint("10.0.0.4", "node-b", false, false, true)),
		// Dual-stack: the IPv6 family has a local endpoint, IPv4 not.
		port("a", "dual", "", L, L, noLocalEndpoint("10.0.0.5", "node-b", true, true, false), noLocalEndpoint("fd00::5", "node-a", true, true, false)),
		// Cluster policies are never counted.
		port("a", "cluster", "", C, C, noLocalEndpoint("10.0.0.6", "node-b", true, true, false)),
	}
	tr := noLocalTracker{}
	for i := range ports {
		tr.set(ports[i].Name, &ports[i], "node-a")
	}
	m := New()
	m.observeNoLocal(tr)
	for labels, want := range map[[2]string]float64{
		{"internal", "IPv4"}: 2, {"internal", "IPv6"}: 0,
		{"external", "IPv4"}: 2, {"external", "IPv6"}: 0,
	} {
		if got := testutil.ToFloat64(m.noLocalEndpoints.WithLabelValues(labels[0], labels[1])); got != want {
			t.Errorf("%v: %v, want %v", labels, got, want)
		}
	}
	// A change that brings a local endpoint, and a removed port.
	web := port("a", "web", "http", L, C, noLocalEndpoint("10.0.0.1", "node-a", true, true, false))
	tr.set(web.Name, &web, "node-a")
	tr.set(ports[1].Name, nil, "node-a")
	m.observeNoLocal(tr)
	if got := testutil.ToFloat64(m.noLocalEndpoints.WithLabelValues("internal", "IPv4")); got != 1 {
		t.Errorf("after the changes: internal IPv4 %v, want 1", got)
	}
}
