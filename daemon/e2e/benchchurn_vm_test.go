//go:build vmtest

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// BenchmarkProxies' churn, after a proxy's single changes (off unless
// IPVSPLANE_BENCH_CHURN is set; make bench-field sets it):
//
//	IPVSPLANE_BENCH_CHURN       how long each proxy is churned, a duration (60s)
//	IPVSPLANE_BENCH_CHURN_RATE  changes a second (default 50)
//	IPVSPLANE_BENCH_CHURN_LOG   1: ipvsplane churns at -v=4 and its log is
//	                            printed after (hack/profiles picks it out)
//	IPVSPLANE_BENCH_CHURN_PROFILE  1: a CPU profile of ipvsplane over the churn
const (
	envBenchChurn     = "IPVSPLANE_BENCH_CHURN"
	envBenchChurnRate = "IPVSPLANE_BENCH_CHURN_RATE"
	envBenchChurnLog  = "IPVSPLANE_BENCH_CHURN_LOG"
	envBenchChurnProf = "IPVSPLANE_BENCH_CHURN_PROFILE"
)

// benchChurn is how long and how fast the churn runs; a zero duration
// runs none.
type benchChurn struct {
	duration time.Duration
	rate     float64
	// log asks for ipvsplane's per-sync log lines over the churn, and
	// profile for its CPU profile.
	log, profile bool
}

// logged and profiled report whether proxy p's churn is logged at -v=4
// and profiled: ipvsplane's, when asked.
func (c benchChurn) logged(p benchProxy) bool {
	return c.duration > 0 && c.log && isIPVSPlane(p.name)
}

func (c benchChurn) profiled(p benchProxy) bool {
	return c.duration > 0 && c.profile && isIPVSPlane(p.name)
}

func benchChurnFromEnv(t testing.TB) benchChurn {
	t.Helper()
	c := benchChurn{rate: 50}
	if v := os.Getenv(envBenchChurn); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("%s=%q: want a duration", envBenchChurn, v)
		}
		c.duration = d
	}
	if v := os.Getenv(envBenchChurnRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("%s=%q: want changes a second", envBenchChurnRate, v)
		}
		c.rate = r
	}
	c.log = os.Getenv(envBenchChurnLog) == "1"
	c.profile = os.Getenv(envBenchChurnProf) == "1"
	return c
}

// churnResult is what a churn measured of one proxy.
type churnResult struct {
	changes int
	// rate is the changes a second the API server took.
	rate float64
	// p50 and p99 are the proxy's network programming latency over the
	// churn, from its kubeproxy_network_programming_duration_seconds.
	p50, p99 float64
	churnSplit
	// windows is the latency's p99 per 15 s of the churn, "*" marking a
	// window with a full sync.
	windows []string
	// write50 and write99 are the API server's time per change.
	write50, write99 time.Duration
	// caughtUp runs from the end of the last write to the end of the
	// sync that programmed it.
	caughtUp time.Duration
	cpu      time.Duration
}

// caughtUp waits until the proxy has programmed the churn, whose last
// write began at lastBegin, ended at lastEnd and moved service i's
// endpoint to the address `to`, and returns how long after lastEnd its last sync ended.
// The proxy may have synced the last change before the write's answer
// reached the client, and kube-proxy's nftables mode then does not sync
// again for an hour: so a sync that ended after the write began counts,
// once no change is pending, no latency has been observed for a second
// (a watch event still on its way would be) and, for the IPVS proxies,
// the kernel holds the last write's real server.
func (e *benchEnv) caughtUp(t testing.TB, pp *proxyProc, p benchProxy, ns *testutil.NetNS, lastBegin, lastEnd time.Time, i int, to netip.Addr) time.Duration {
	t.Helper()
	var lastSync time.Time
	observed, quietSince := -1.0, time.Now()
	err := pp.poll(t.Context(), 30*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		m, err := pp.metrics(ctx, metricLastSync, metricProgramCount, "kubeproxy_sync_proxy_rules_endpoint_changes_pending")
		if err != nil {
			return false, err
		}
		if m[metricProgramCount] != observed {
			observed, quietSince = m[metricProgramCount], time.Now()
		}
		lastSync = time.Unix(0, int64(m[metricLastSync]*1e9))
		if m["kubeproxy_sync_proxy_rules_endpoint_changes_pending"] > 0 || lastSync.Before(lastBegin) || time.Since(quietSince) < time.Second {
			return false, nil
		}
		if !p.ipvs {
			return true, nil
		}
		return ipvsHasDest(ctx, ns, e.cluster.vips[i], to)
	})
	if err != nil {
		t.Fatalf("%s did not catch up with its churn: %v", p.name, err)
	}
	return max(0, lastSync.Sub(lastEnd))
}

// churner moves endpoint 0 of random services through the API server,
// never two changes to one service at once.
type churner struct {
	cluster *benchCluster
	mu      sync.Mutex
	rng     *rand.Rand
	busy    map[int]bool
	// written holds each churned service's slice as last written, so a
	// change is one write.
	written map[int]*discoveryv1.EndpointSlice
}

// pick takes a random service that no change is working on and a new
// address for its endpoint 0, in 10.251.0.0/16, where no other endpoint is.
func (c *churner) pick() (int, netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		i := c.rng.IntN(len(c.cluster.vips))
		if !c.busy[i] {
			c.busy[i] = true
			return i, netip.AddrFrom4([4]byte{10, 251, byte(c.rng.IntN(256)), byte(1 + c.rng.IntN(254))})
		}
	}
}

// move sets service i's endpoint 0 to addr.
func (c *churner) move(ctx context.Context, i int, to netip.Addr) error {
	defer func() {
		c.mu.Lock()
		c.busy[i] = false
		c.mu.Unlock()
	}()
	api := c.cluster.client.DiscoveryV1().EndpointSlices(c.cluster.namespace)
	c.mu.Lock()
	s := c.written[i]
	c.mu.Unlock()
	if s == nil {
		var err error
		if s, err = api.Get(ctx, benchServiceName(i)+"-1", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading %s's slice: %w", benchServiceName(i), err)
		}
	}
	s = s.DeepCopy()
	s.Endpoints[0].Addresses = []string{to.String()}
	got, err := api.Update(ctx, kubetest.Triggered(s), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("moving %s's endpoint 0 to %s: %w", benchServiceName(i), to, err)
	}
	c.mu.Lock()
	c.written[i] = got
	c.mu.Unlock()
	return nil
}

// churn puts proxy p, synced in ns, through c (see atRate). It then waits until the proxy has programmed the last write to end, and
// reads the programming latency of the whole churn from its metrics.
func (e *benchEnv) churn(t testing.TB, pp *proxyProc, p benchProxy, ns *testutil.NetNS, c benchChurn, seed int) churnResult {
	t.Helper()
	ctx := t.Context()
	ch := &churner{cluster: e.cluster, rng: rand.New(rand.NewPCG(uint64(seed), 28)), busy: map[int]bool{}, written: map[int]*discoveryv1.EndpointSlice{}}
	m0, cpu0 := scrape(t, pp), cpuTime(t, pp)
	var windows []string
	stopWindows := sampleLatencyWindows(pp, 15*time.Second, m0, &windows)
	waitProfile := func() {}
	if c.profiled(p) {
		waitProfile = pp.profileCPU(t, fmt.Sprintf("churn-%s-%d", p.name, len(e.cluster.vips)), c.duration)
	}
	var (
		mu       sync.Mutex
		writes   []time.Duration
		firstErr error
		// The write that ended last: when it began and ended, and what
		// it wrote.
		lastBegin, lastEnd time.Time
		lastI              int
		lastTo             netip.Addr
	)
	elapsed := atRate(c.rate, c.duration, func() {
		i, to := ch.pick()
		begin := time.Now()
		err := ch.move(ctx, i, to)
		end := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			return
		}
		writes = append(writes, end.Sub(begin))
		if end.After(lastEnd) {
			lastBegin, lastEnd, lastI, lastTo = begin, end, i, to
		}
	})
	if firstErr != nil {
		t.Fatalf("%s's churn: %v", p.name, firstErr)
	}
	if len(writes) == 0 {
		t.Fatalf("%s's churn: no change written", p.name)
	}
	r := churnResult{changes: len(writes), rate: float64(len(writes)) / elapsed.Seconds()}
	r.caughtUp = e.caughtUp(t, pp, p, ns, lastBegin, lastEnd, lastI, lastTo)
	waitProfile()
	stopWindows()
	r.windows = windows
	m1 := scrape(t, pp)
	r.cpu = cpuTime(t, pp) - cpu0
	buckets := m1.histogram("kubeproxy_network_programming_duration_seconds", m0)
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		t.Fatalf("%s: no network programming latency observed over its churn", p.name)
	}
	r.p50, r.p99 = histQuantile(0.5, buckets), histQuantile(0.99, buckets)
	r.churnSplit = readSplit(m0, m1)
	slices.Sort(writes)
	r.write50, r.write99 = percentile(writes, 50), percentile(writes, 99)
	t.Logf("%s at %d services: churn of %d changes (%.1f/s, asked %.0f/s; the API server took p50 %v p99 %v per write), programming latency p50 %.2fs p99 %.2fs (the proxy's own part p50 %.3fs p99 %.3fs), caught up %v after the last write, %.1f CPU s (garbage collection %.1f); %v syncs of p50 %.3fs p99 %.3fs; latency p99 per 15 s (* a full sync) %s",
		p.name, len(e.cluster.vips), r.changes, r.rate, c.rate, r.write50.Round(time.Millisecond), r.write99.Round(time.Millisecond),
		r.p50, r.p99, r.ownP50, r.ownP99, r.caughtUp.Round(time.Millisecond), r.cpu.Seconds(), r.gcCPU,
		r.syncs, r.syncP50, r.syncP99, strings.Join(r.windows, " "))
	return r
}

// churnSplit is what splits a churn's programming latency, beside the
// API server's write and its watch's delivery, which every proxy waits
// for alike.
type churnSplit struct {
	// ownP50 and ownP99 are ipvsplane's own part, from a change's arrival
	// (ipvsplane_change_programming_duration_seconds); NaN for kube-proxy,
	// which has no such metric.
	ownP50, ownP99 float64
	// syncs is how many syncs ran, of p50 and p99 syncP50 and syncP99
	// seconds.
	syncs, syncP50, syncP99 float64
	// gcCPU is the Go collector's CPU seconds (ipvsplane).
	gcCPU float64
}

// readSplit reads the split from the proxy's metrics before (m0) and
// after (m1) the churn.
func readSplit(m0, m1 promText) churnSplit {
	s := churnSplit{ownP50: math.NaN(), ownP99: math.NaN()}
	if own := m1.histogram("ipvsplane_change_programming_duration_seconds", m0); len(own) > 0 {
		s.ownP50, s.ownP99 = histQuantile(0.5, own), histQuantile(0.99, own)
	}
	s.syncs = m1.sum("kubeproxy_sync_proxy_rules_duration_seconds_count") - m0.sum("kubeproxy_sync_proxy_rules_duration_seconds_count")
	if syncs := m1.histogram("kubeproxy_sync_proxy_rules_duration_seconds", m0); len(syncs) > 0 {
		s.syncP50, s.syncP99 = histQuantile(0.5, syncs), histQuantile(0.99, syncs)
	}
	const gcCPU = "go_cpu_classes_gc_total_cpu_seconds_total"
	s.gcCPU = m1.sum(gcCPU) - m0.sum(gcCPU)
	return s
}
