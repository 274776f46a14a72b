//go:build vmtest

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The benchmark's sizes and proxies come from the environment, so CI and
// a developer can run a short version (daemon/internal/testing/vmtest passes IPVSPLANE_*
// variables into the guest):
//
//	IPVSPLANE_BENCH_SERVICES  sizes, comma-separated (default 100,1000,10000)
//	IPVSPLANE_BENCH_PROXIES   proxies, comma-separated (default all, baseline first:
//	                          kube-proxy-ipvs,kube-proxy-nftables,kube-proxy-iptables,ipvsplane)
//	IPVSPLANE_BENCH_ENDPOINTS endpoints of each service (default 10, at most 100):
//	                          44000 services x 1 and 5000 x 50 are the shapes of
//	                          kubernetes#139513 and #135639
//	IPVSPLANE_BENCH_CHANGES   endpoint changes timed per proxy and size (default 3)
//	IPVSPLANE_BENCH_PROFILE_SECONDS  seconds of CPU profile of ipvsplane from its start at
//	                          the largest size, which should cover its first sync
//	                          (default 0: none); hack/profiles picks it out of the log
const (
	envBenchServices  = testutil.BenchServicesEnv
	envBenchProxies   = "IPVSPLANE_BENCH_PROXIES"
	envBenchChanges   = "IPVSPLANE_BENCH_CHANGES"
	envBenchEndpoints = "IPVSPLANE_BENCH_ENDPOINTS"
	envBenchProfile   = "IPVSPLANE_BENCH_PROFILE_SECONDS"
)

// benchFirstSyncTimeout bounds a first sync: kube-proxy's IPVS mode runs
// the ipset program once per set entry, about 40 minutes at 10,000
// services under emulation. IPVSPLANE_BENCH_SYNC_LIMIT sets a shorter
// bound, past which a proxy is reported as not done (not-done-within-s)
// and nothing else of it is measured: at the field shapes kube-proxy's
// modes take hours under emulation.
const benchFirstSyncTimeout = 3 * time.Hour

const envBenchSyncLimit = "IPVSPLANE_BENCH_SYNC_LIMIT"

// benchSyncLimit reads IPVSPLANE_BENCH_SYNC_LIMIT.
func benchSyncLimit(t testing.TB) time.Duration {
	v := os.Getenv(envBenchSyncLimit)
	if v == "" {
		return benchFirstSyncTimeout
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration", envBenchSyncLimit, v)
	}
	return d
}

// benchResult is what one proxy measured at one size.
type benchResult struct {
	// sync runs from the proxy's start to the end of its first sync,
	// after which the kernel holds every service.
	sync time.Duration
	// syncAlone is how long the syncs up to the end of the first took by
	// the proxy's own measure, without its start and listing; ipvsplane's
	// prefills while it listed are in it, and in prefill too.
	syncAlone, prefill time.Duration
	// restart runs from a restarted proxy's start to the end of its first
	// sync, the state of its first run still in the kernel (measured
	// when asked).
	restart time.Duration
	// change is the mean time from an EndpointSlice update to the end of
	// the sync that programmed it (network-programming latency).
	change time.Duration
	// peak is the proxy process's peak resident memory in MiB, and
	// peakParts the highest of the samples taken every 200 ms.
	peak      float64
	peakParts rssSample
	// cpu is the CPU time the proxy (and what it ran: iptables-restore,
	// ipset, nft) used from its start to the end of its first sync.
	cpu time.Duration
	// notDone is IPVSPLANE_BENCH_SYNC_LIMIT when the first sync outlasted
	// it; nothing else was measured then.
	notDone time.Duration
	// churn is the restarted proxy's churn (IPVSPLANE_BENCH_CHURN).
	churn churnResult
}

// benchEnv holds what every measurement shares.
type benchEnv struct {
	cluster    *benchCluster
	kubeconfig string
	// nets counts the namespaces made, so each gets its own addresses.
	nets int
	// profileAt is the size whose first sync of ipvsplane is profiled
	// (IPVSPLANE_BENCH_PROFILE_SECONDS): the largest.
	profileAt int
}

func newBenchEnv(t testing.TB, namespace string) *benchEnv {
	t.Helper()
	testutil.RequireVM(t)
	for _, prog := range []string{"kube-proxy", "ipvsplane", "ipset", "iptables", "nft", "ip"} {
		testutil.RequireProgram(t, prog)
	}
	cp := controlplane.FromVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	endpoints := benchEnvInt(t, envBenchEndpoints, 10)
	if endpoints < 1 || endpoints > 100 {
		t.Fatalf("%s=%d: want 1 to 100", envBenchEndpoints, endpoints)
	}
	cluster, err := newBenchCluster(ctx, kubernetes.NewForConfigOrDie(cp.RESTConfig()), cp, namespace, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		if err := cluster.delete(ctx); err != nil {
			t.Errorf("deleting the benchmark's services: %v", err)
		}
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	return &benchEnv{cluster: cluster, kubeconfig: kubeconfig}
}

// grow brings the cluster to n services.
func (e *benchEnv) grow(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	times, err := e.cluster.grow(ctx, n)
	if err != nil {
		t.Fatalf("creating %d services: %v", n, err)
	}
	t.Logf("%d services and EndpointSlices in the API server (%v: services stored in %v, slices created in %v, addresses listed %v later)",
		n, time.Since(start).Round(time.Second), times.services.Round(time.Millisecond), times.slices.Round(time.Millisecond), times.listed.Round(time.Millisecond))
}

// measure runs proxy p in a fresh namespace on the cluster as it is: its
// first sync, then changes endpoint changes one after another, then its
// peak memory. It checks the kernel after the first sync and after each
// change (IPVS proxies), outside the measured times.
func (e *benchEnv) measure(t testing.TB, p benchProxy, changes int, restart bool) benchResult {
	t.Helper()
	e.nets++
	index := e.nets
	ns := benchNet(t, index)
	ctx := context.Background()
	var profile time.Duration
	if p.name == "ipvsplane" && len(e.cluster.vips) == e.profileAt {
		profile = time.Duration(benchEnvInt(t, envBenchProfile, 0)) * time.Second
	}
	if profile > 0 {
		p.args = withArgs(p.args, "--profiling")
	}
	dir := t.TempDir()
	pp := startProxy(t, p, ns, e.kubeconfig, dir)
	stopRSS := sampleRSSPeak(pp)
	waitProfile := func() {}
	if profile > 0 {
		waitProfile = pp.profileCPU(t, fmt.Sprintf("first-sync-%d", len(e.cluster.vips)), profile)
	}
	var r benchResult
	var err error
	limit := benchSyncLimit(t)
	if r.sync, r.syncAlone, r.prefill, err = pp.waitFirstSyncAlone(ctx, limit); errors.Is(err, errNotDone) && limit < benchFirstSyncTimeout {
		// A measurement of its own: the proxy is slower than the bound
		// the benchmark was asked for. It is reported, not skipped.
		peak, _ := pp.peakRSS()
		stopRSS()
		t.Logf("%s at %d services: NOT DONE, no first sync within %v (%s); %.1f CPU s, peak RSS %.1f MiB so far",
			p.name, len(e.cluster.vips), limit, envBenchSyncLimit, cpuTime(t, pp).Seconds(), peak)
		waitProfile()
		return benchResult{notDone: limit}
	} else if err != nil {
		t.Fatal(err)
	}
	r.cpu = cpuTime(t, pp)
	waitProfile()
	vips := e.cluster.vips
	if err := p.holds(ctx, ns, vips, e.cluster.endpoints); err != nil {
		t.Fatalf("%s after its first sync: %v", p.name, err)
	}
	var total time.Duration
	for c := range changes {
		// Past the proxies' --min-sync-period of 1s, so a change is not
		// held back by the sync before it.
		time.Sleep(1100 * time.Millisecond)
		sum0, count0, err := pp.programmed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := (len(vips)/2 + c*7919) % len(vips)
		to := netip.AddrFrom4([4]byte{10, 250, byte(index), byte(c + 1)})
		if err := e.cluster.moveEndpoint(ctx, i, to); err != nil {
			t.Fatal(err)
		}
		var sum, count float64
		if err := pp.poll(ctx, time.Hour, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
			sum, count, err = pp.programmed(ctx)
			return count > count0, err
		}); err != nil {
			t.Fatalf("change %d (%s's endpoint 0 to %s): %v", c, benchServiceName(i), to, err)
		}
		total += time.Duration((sum - sum0) / (count - count0) * 1e9)
		if p.ipvs {
			if err := pp.poll(ctx, time.Minute, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
				return ipvsHasDest(ctx, ns, vips[i], to)
			}); err != nil {
				t.Fatalf("change %d reported programmed, but %s:80 has no real server %s: %v", c, vips[i], to, err)
			}
		}
	}
	if changes > 0 {
		r.change = total / time.Duration(changes)
	}
	if r.peak, err = pp.peakRSS(); err != nil {
		t.Fatal(err)
	}
	r.peakParts = stopRSS()
	if err := pp.stop(); err != nil {
		t.Fatal(err)
	}
	churn := benchChurnFromEnv(t)
	if restart {
		// As a node's proxy restarts: the same namespace and files. It
		// runs with its own default shortest time between syncs, for the
		// churn: the churn's latency is what a node's proxy shows.
		restarted := withDefaultMinSync(p)
		if churn.logged(p) {
			restarted.args = withArgs(restarted.args, "-v=4")
		}
		if churn.profiled(p) {
			restarted.args = withArgs(restarted.args, "--profiling")
		}
		pp = startProxy(t, restarted, ns, e.kubeconfig, dir)
		if r.restart, err = pp.waitFirstSync(ctx, limit); err != nil {
			t.Fatalf("%s restarted: %v", p.name, err)
		}
		if churn.duration > 0 {
			r.churn = e.churn(t, pp, p, ns, churn, index)
		}
		if churn.logged(p) {
			pp.printLog(t, fmt.Sprintf("bench-%s-%d-log", p.name, len(vips)))
		}
		if err := pp.stop(); err != nil {
			t.Fatal(err)
		}
	}
	restarted := "not restarted"
	if restart {
		restarted = fmt.Sprintf("restarted %v", r.restart.Round(time.Millisecond))
	}
	t.Logf("%s at %d services: first sync %v from the start (the syncs alone %v, of them prefills %v; %.1f CPU s), %s, change %v, peak RSS %.1f MiB (the highest sample %v)",
		p.name, len(vips), r.sync.Round(time.Millisecond), r.syncAlone.Round(time.Millisecond), r.prefill.Round(time.Millisecond), r.cpu.Seconds(), restarted,
		r.change.Round(time.Microsecond), r.peak, r.peakParts)
	return r
}

// withDefaultMinSync is p without the benchmark's --*-min-sync-period.
func withDefaultMinSync(p benchProxy) benchProxy {
	args := p.args
	p.args = func(kubeconfig, dir string) []string {
		return slices.DeleteFunc(args(kubeconfig, dir), func(a string) bool {
			return strings.HasPrefix(a, "--ipvs-min-sync-period=") || strings.HasPrefix(a, "--iptables-min-sync-period=")
		})
	}
	return p
}

// BenchmarkProxies compares, on the same Services and EndpointSlices in
// the same API server, kube-proxy in IPVS mode (the baseline), kube-proxy
// in nftables and iptables modes and the ipvsplane daemon, each in a network namespace
// of its own in the guest, at each size of services x 10 endpoints (one
// in ten a NodePort service):
//
//   - ns/op and sync-s: the full sync, from the process's start to the
//     end of its first sync (the kubeproxy_sync_proxy_rules_last_timestamp_seconds
//     metric all four export), after which the benchmark checks that the
//     kernel holds every service;
//   - change-ms: one endpoint of one service moved, from the EndpointSlice
//     update (its trigger-time annotation) to the end of the sync that
//     programmed it (kubeproxy_network_programming_duration_seconds), the
//     mean of IPVSPLANE_BENCH_CHANGES changes; for the IPVS proxies the
//     benchmark also sees the new real server in the kernel;
//   - sync-alone-s and start/sync: the syncs up to that end by the proxy's
//     own kubeproxy_sync_proxy_rules_duration_seconds, without its start
//     and listing, and the full sync's time over it; for ipvsplane with
//     its prefills while it listed (ipvsplane_prefill_duration_seconds),
//     which are also prefill-s;
//   - restart-s: the proxy stopped and started again in its namespace, the
//     full sync of the restarted one, the kernel already holding its
//     state;
//   - peak-MiB: the proxy process's VmHWM (of the first run);
//   - not-done-within-s: instead of the others, the bound of
//     IPVSPLANE_BENCH_SYNC_LIMIT when the first sync outlasted it;
//   - sync-cpu-s: the CPU time the proxy and its children used from its
//     start to the end of its first sync;
//   - churn-p50-s and churn-p99-s: with IPVSPLANE_BENCH_CHURN (see
//     benchChurn), the network-programming latency's p50 and p99 over a
//     churn of endpoint moves at IPVSPLANE_BENCH_CHURN_RATE a second, of
//     the restarted proxy, which runs with its default --*-min-sync-period
//     (kube-proxy's nftables and iptables modes 1 s, its IPVS mode and
//     ipvsplane none); churn-changes/s is the rate the API server took and
//     churn-cpu-s the proxy's CPU time from the churn's start until it
//     caught up; churn-own-p99-s, ipvsplane's only, the p99 of its own
//     part, from a change's arrival to its programming;
//   - change/smallest: above the smallest size, the proxy's change-ms over
//     its change-ms at the smallest size (1 when a change costs the same
//     whatever the number of services).
func BenchmarkProxies(b *testing.B) {
	sizes := benchSizes(b)
	proxies := benchSelected(b)
	changes := benchEnvInt(b, envBenchChanges, 3)
	env := newBenchEnv(b, "bench")
	env.profileAt = sizes[len(sizes)-1]
	results := map[string]map[int]benchResult{}
	for _, n := range sizes {
		name := fmt.Sprintf("services=%d", n)
		if e := env.cluster.endpoints; e != 10 {
			name += fmt.Sprintf("x%d", e)
		}
		b.Run(name, func(b *testing.B) {
			env.grow(b, n)
			for _, p := range proxies {
				b.Run(p.name, func(b *testing.B) {
					var r benchResult
					for range b.N {
						r = env.measure(b, p, changes, true)
					}
					if r.notDone > 0 {
						b.ReportMetric(r.notDone.Seconds(), "not-done-within-s")
						return
					}
					if results[p.name] == nil {
						results[p.name] = map[int]benchResult{}
					}
					results[p.name][n] = r
					b.ReportMetric(float64(r.sync.Nanoseconds()), "ns/op")
					b.ReportMetric(r.sync.Seconds(), "sync-s")
					if r.syncAlone > 0 {
						b.ReportMetric(r.syncAlone.Seconds(), "sync-alone-s")
						b.ReportMetric(float64(r.sync)/float64(r.syncAlone), "start/sync")
						b.ReportMetric(r.prefill.Seconds(), "prefill-s")
					}
					b.ReportMetric(r.restart.Seconds(), "restart-s")
					b.ReportMetric(float64(r.change.Microseconds())/1000, "change-ms")
					b.ReportMetric(r.peak, "peak-MiB")
					b.ReportMetric(r.cpu.Seconds(), "sync-cpu-s")
					if r.churn.changes > 0 {
						b.ReportMetric(r.churn.p50, "churn-p50-s")
						b.ReportMetric(r.churn.p99, "churn-p99-s")
						b.ReportMetric(r.churn.rate, "churn-changes/s")
						b.ReportMetric(r.churn.cpu.Seconds(), "churn-cpu-s")
						if !math.IsNaN(r.churn.ownP99) {
							b.ReportMetric(r.churn.ownP99, "churn-own-p99-s")
						}
					}
					if s := results[p.name][sizes[0]]; n != sizes[0] && s.change > 0 {
						b.ReportMetric(float64(r.change)/float64(s.change), "change/smallest")
					}
				})
			}
		})
	}
}

// TestProxiesSmall is the benchmark's short version for make test: the
// three proxies on 100 services, one change each. It checks what the
// benchmark checks (the kernel holds every service, a change is
// programmed) and logs the figures, without judging them.
func TestProxiesSmall(t *testing.T) {
	env := newBenchEnv(t, "bench-small")
	env.grow(t, 100)
	for _, p := range benchProxies {
		if p.name == "kube-proxy-iptables" {
			// The benchmark has it; make test's time goes to the IPVS
			// and nftables modes, the one replaced and the one advised.
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			if r := env.measure(t, p, 1, false); r.notDone > 0 {
				t.Fatalf("%s: no first sync within %v", p.name, r.notDone)
			}
		})
	}
}

// benchSizes reads IPVSPLANE_BENCH_SERVICES (testutil.BenchSizes).
func benchSizes(t testing.TB) []int {
	return testutil.BenchSizes(t, 1<<20, 100, 1000, 10000)
}

// benchSelected reads IPVSPLANE_BENCH_PROXIES; the proxies keep their
// order, baseline first.
func benchSelected(t testing.TB) []benchProxy {
	v := os.Getenv(envBenchProxies)
	if v == "" {
		return benchProxies
	}
	want := strings.Split(v, ",")
	var out []benchProxy
	for _, p := range append(benchProxies, benchLocalRoute()) {
		if slices.Contains(want, p.name) {
			out = append(out, p)
		}
	}
	if len(out) != len(want) {
		t.Fatalf("%s=%q: the proxies are %s", envBenchProxies, v, benchProxyNames())
	}
	return out
}

func benchProxyNames() string {
	var names []string
	for _, p := range append(benchProxies, benchLocalRoute()) {
		names = append(names, p.name)
	}
	return strings.Join(names, ",")
}

// benchLocalRoute is ipvsplane binding the service IPs as local routes,
// run only when asked for by name: bound as addresses, each one added
// walks the device's whole address list in the kernel.
func benchLocalRoute() benchProxy {
	i := slices.IndexFunc(benchProxies, func(p benchProxy) bool { return p.name == "ipvsplane" })
	p := benchProxies[i]
	p.name, p.args = "ipvsplane-local-route", withArgs(p.args, "--service-address-binding=local-route")
	return p
}

func benchEnvInt(t testing.TB, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", key, v)
	}
	return n
}
