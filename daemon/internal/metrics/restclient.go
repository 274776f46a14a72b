package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// restClient holds client-go's request metrics under the names and labels
// kube-proxy serves them with (component-base's rest_client_*), which
// kube-proxy's dashboards read: the API server's answers by code, method
// and host, and how long requests took and waited for the client's rate
// limiter, by verb and host.
type restClient struct {
	latency, rateLimiter      *prometheus.HistogramVec
	requestSize, responseSize *prometheus.HistogramVec
	results, retries          *prometheus.CounterVec
}

func newRESTClient() *restClient {
	verbHost := []string{"verb", "host"}
	// kube-proxy's buckets, so that its dashboards' quantiles read alike.
	latencyBuckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	sizeBuckets := []float64{64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216}
	return &restClient{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "API server request latency in seconds, by verb and host.", Buckets: latencyBuckets,
		}, verbHost),
		rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Help: "How long API server requests waited for the client's rate limiter, by verb and host.", Buckets: latencyBuckets,
		}, verbHost),
		requestSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_size_bytes", Help: "API server request size in bytes, by verb and host.", Buckets: sizeBuckets,
		}, verbHost),
		responseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_response_size_bytes", Help: "API server response size in bytes, by verb and host.", Buckets: sizeBuckets,
		}, verbHost),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "API server requests, by status code, method and host.",
		}, []string{"code", "method", "host"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total", Help: "API server requests retried, by status code, verb and host.",
		}, []string{"code", "verb", "host"}),
	}
}

func (r *restClient) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.latency, r.rateLimiter, r.requestSize, r.responseSize, r.results, r.retries}
}

// ClientGoMetrics returns the hooks that record client-go's requests in
// m's registry, for client-go's metrics.Register. client-go keeps them
// process-wide and takes the first Register only: the daemon registers
// the metrics it serves, once, before its first request.
func (m *Metrics) ClientGoMetrics() clientmetrics.RegisterOpts {
	return clientmetrics.RegisterOpts{
		RequestLatency:     latencyHook{m.rest.latency},
		RateLimiterLatency: latencyHook{m.rest.rateLimiter},
		RequestSize:        sizeHook{m.rest.requestSize},
		ResponseSize:       sizeHook{m.rest.responseSize},
		RequestResult:      countHook{m.rest.results},
		RequestRetry:       retryHook{countHook{m.rest.retries}},
	}
}

type latencyHook struct{ h *prometheus.HistogramVec }

func (l latencyHook) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	l.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type sizeHook struct{ h *prometheus.HistogramVec }

func (s sizeHook) Observe(_ context.Context, verb, host string, size float64) {
	s.h.WithLabelValues(verb, host).Observe(size)
}

type countHook struct{ c *prometheus.CounterVec }

func (c countHook) Increment(_ context.Context, code, method, host string) {
	c.c.WithLabelValues(code, method, host).Inc()
}

type retryHook struct{ countHook }

func (r retryHook) IncrementRetry(ctx context.Context, code, verb, host string) {
	r.Increment(ctx, code, verb, host)
}
