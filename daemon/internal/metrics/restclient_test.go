package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's requests, once its hooks are registered, are counted and
// timed under kube-proxy's rest_client_* names and labels, which
// kube-prometheus' kube-proxy dashboard reads (rest_client_requests_total
// by code, rest_client_request_duration_seconds by verb).
func TestClientGoMetrics(t *testing.T) {
	m := New()
	// The test binary's first and only Register: client-go keeps the
	// hooks process-wide.
	clientmetrics.Register(m.ClientGoMetrics())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/nodes/missing" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[]}`))
	}))
	defer api.Close()
	client, err := rest.RESTClientFor(&rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}, APIPath: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := client.Get().Resource("nodes").Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Get().Resource("nodes").Name("missing").Do(ctx).Error(); err == nil {
		t.Fatal("no error for a missing node")
	}
	host := strings.TrimPrefix(api.URL, "http://")
	if got := testutil.ToFloat64(m.rest.results.WithLabelValues("200", "GET", host)); got != 2 {
		t.Errorf("rest_client_requests_total{code=200,method=GET}: %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.rest.results.WithLabelValues("404", "GET", host)); got != 1 {
		t.Errorf("rest_client_requests_total{code=404,method=GET}: %v, want 1", got)
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var timed uint64
	for _, f := range families {
		if f.GetName() != "rest_client_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] != "GET" || labels["host"] != host {
				t.Errorf("rest_client_request_duration_seconds%v", labels)
			}
			timed += s.GetHistogram().GetSampleCount()
		}
	}
	if timed != 3 {
		t.Errorf("rest_client_request_duration_seconds: %d requests timed, want 3", timed)
	}
}
