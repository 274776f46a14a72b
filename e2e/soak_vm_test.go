//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// soakParams size the churn soak. make test runs the short defaults;
// make soak the full size (IPVSPLANE_SOAK_SERVICES=10000,
// IPVSPLANE_SOAK_DURATION=60s, IPVSPLANE_SOAK_RATE=50).
type soakParams struct {
	services  int
	endpoints int
	duration  time.Duration
	rate      float64
}

func soakParamsFromEnv(t *testing.T) soakParams {
	t.Helper()
	p := soakParams{services: 1000, endpoints: 3, duration: 15 * time.Second, rate: 50}
	for _, v := range []struct {
		env string
		set func(string) error
	}{
		{"IPVSPLANE_SOAK_SERVICES", func(s string) (err error) { p.services, err = strconv.Atoi(s); return }},
		{"IPVSPLANE_SOAK_ENDPOINTS", func(s string) (err error) { p.endpoints, err = strconv.Atoi(s); return }},
		{"IPVSPLANE_SOAK_DURATION", func(s string) (err error) { p.duration, err = time.ParseDuration(s); return }},
		{"IPVSPLANE_SOAK_RATE", func(s string) (err error) { p.rate, err = strconv.ParseFloat(s, 64); return }},
	} {
		if s := os.Getenv(v.env); s != "" {
			if err := v.set(s); err != nil {
				t.Fatalf("%s=%q: %v", v.env, s, err)
			}
		}
	}
	if p.services < 100 || p.endpoints < 2 || p.duration <= 0 || p.rate <= 0 {
		t.Fatalf("soak parameters out of range: %+v", p)
	}
	return p
}

// soakService is the test's model of one service and its one slice: what
// the kernel must hold for it once the daemon has caught up.
type soakService struct {
	svc   *corev1.Service
	slice *discoveryv1.EndpointSlice
	eps   []string
	busy  bool
}

func (s *soakService) key() string {
	return fmt.Sprintf("tcp/%s:%d", s.svc.Spec.ClusterIP, s.svc.Spec.Ports[0].Port)
}

func (s *soakService) want() string {
	return realsOf(int(*s.slice.Ports[0].Port), s.eps...)
}

// soak holds the model and the client of a churn soak.
type soak struct {
	f   *kubeFixture
	rng *rand.Rand

	mu       sync.Mutex
	services []*soakService // live ones
	ips      map[string]bool
	next     int
	counts   map[string]int
}

// randomEndpoint returns an address in the pod range not yet in eps.
func (s *soak) randomEndpoint(eps []string) string {
	for {
		a := fmt.Sprintf("10.244.%d.%d", 100+s.rng.IntN(150), 1+s.rng.IntN(254))
		if !slices.Contains(eps, a) {
			return a
		}
	}
}

// create creates a service and its slice, and adds them to the model.
func (s *soak) create(ctx context.Context, endpoints int) error {
	s.mu.Lock()
	name := fmt.Sprintf("s-%d", s.next)
	s.next++
	var eps []string
	for range endpoints {
		eps = append(eps, s.randomEndpoint(eps))
	}
	s.mu.Unlock()
	f := s.f
	svc, err := f.client.CoreV1().Services(f.ns).Create(ctx, kubeService(f.ns, name, corev1.ServiceTypeClusterIP, 80), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	slice, err := f.client.DiscoveryV1().EndpointSlices(f.ns).Create(ctx, kubeSlice(f.ns, name, name+"-1", 8080, eps...), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.services = append(s.services, &soakService{svc: svc, slice: slice, eps: eps})
	s.ips[svc.Spec.ClusterIP] = true
	s.mu.Unlock()
	return nil
}

// pick takes a random live service that no other change is working on.
func (s *soak) pick() *soakService {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		ss := s.services[s.rng.IntN(len(s.services))]
		if !ss.busy {
			ss.busy = true
			return ss
		}
	}
}

func (s *soak) release(ss *soakService) {
	s.mu.Lock()
	ss.busy = false
	s.mu.Unlock()
}

// change makes one random change through the API server: an endpoint
// added, removed or replaced, the service's port or the endpoints' port
// changed, or a service deleted and another created.
func (s *soak) change(ctx context.Context) error {
	ss := s.pick()
	defer s.release(ss)
	f := s.f
	s.mu.Lock()
	roll := s.rng.IntN(100)
	eps := append([]string(nil), ss.eps...)
	kind := ""
	switch {
	case roll < 25:
		kind, eps = "endpoint added", append(eps, s.randomEndpoint(eps))
	case roll < 45 && len(eps) > 1:
		i := s.rng.IntN(len(eps))
		kind, eps = "endpoint removed", append(eps[:i], eps[i+1:]...)
	case roll < 70:
		kind = "endpoint changed"
		eps[s.rng.IntN(len(eps))] = s.randomEndpoint(eps)
	case roll < 80:
		kind = "service port"
	case roll < 90:
		kind = "endpoint port"
	default:
		kind = "service replaced"
	}
	s.counts[kind]++
	s.mu.Unlock()

	switch kind {
	case "service port":
		svc := ss.svc.DeepCopy()
		svc.Spec.Ports[0].Port = 80 + (svc.Spec.Ports[0].Port-79)%2
		got, err := f.client.CoreV1().Services(f.ns).Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("%s of %s: %w", kind, svc.Name, err)
		}
		ss.svc = got
		return nil
	case "service replaced":
		name := ss.svc.Name
		if err := f.client.DiscoveryV1().EndpointSlices(f.ns).Delete(ctx, ss.slice.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting the slice of %s: %w", name, err)
		}
		if err := f.client.CoreV1().Services(f.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
		s.mu.Lock()
		for i, x := range s.services {
			if x == ss {
				s.services = append(s.services[:i], s.services[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		return s.create(ctx, len(ss.eps))
	}
	port := *ss.slice.Ports[0].Port
	if kind == "endpoint port" {
		port = 8080 + (port-8079)%2
	}
	slice := kubeSlice(f.ns, ss.svc.Name, ss.slice.Name, port, eps...)
	slice.ResourceVersion = ss.slice.ResourceVersion
	got, err := f.client.DiscoveryV1().EndpointSlices(f.ns).Update(ctx, slice, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("%s of %s: %w", kind, ss.svc.Name, err)
	}
	ss.slice, ss.eps = got, eps
	return nil
}

// mismatches compares the kernel's virtual servers on the model's cluster
// IPs (those of live and of deleted services) with the model.
func (s *soak) mismatches(table map[string]*virtualServer) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[string]string, len(s.services))
	for _, ss := range s.services {
		want[ss.key()] = ss.want()
	}
	var out []string
	for k, w := range want {
		if got := servingReals(table, k); got != w {
			out = append(out, fmt.Sprintf("%s: %q, want %q", k, got, w))
		}
	}
	for k, vs := range table {
		if _, ok := want[k]; !ok && s.ips[vs.addr.Addr().String()] {
			out = append(out, k+": left over")
		}
	}
	return out
}

// procStatusKiB reads a size in KiB, such as VmRSS or VmHWM, from a
// process's /proc/<pid>/status.
func procStatusKiB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func meanKiB(xs []int) float64 {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}

// The churn soak: many services with a few endpoints each are created
// through the API server, the daemon programs them, then changes arrive
// at a steady rate for a while. Every change must be programmed (the
// final IPVS table equals the model), the daemon's memory must stay flat
// (the mean RSS of the churn's last third within 10% of its first
// third's), and the network programming latency is reported from the
// daemon's histogram.
func TestChurnSoak(t *testing.T) {
	p := soakParamsFromEnv(t)
	f := newKubeFixture(t, "e2e-soak")
	const node = "e2e-soak-node"
	ctx := f.ctx
	s := &soak{f: f, rng: rand.New(rand.NewPCG(1, 2)), ips: map[string]bool{}, counts: map[string]int{}}

	start := time.Now()
	jobs := make(chan struct{})
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range jobs {
				if err := s.create(ctx, p.endpoints); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for range p.services {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("creating the services: %v", err)
	default:
	}
	created := time.Since(start)
	t.Logf("created %d services and %d EndpointSlices (%d endpoints each) in %v (%.0f objects/s)",
		p.services, p.services, p.endpoints, created.Round(time.Millisecond), 2*float64(p.services)/created.Seconds())

	f.setNodeAddresses(node, "10.0.2.15")
	d := startKubeDaemon(t, f.cp, node)
	firstSync := d.waitSynced(t, 10*time.Minute)
	converge := func(what string) time.Duration {
		t.Helper()
		begin := time.Now()
		var wrong []string
		eventuallyKernel(t, d, 5*time.Minute, what, func() string {
			wrong = s.mismatches(ipvsadmTable(t))
			if len(wrong) == 0 {
				return ""
			}
			return fmt.Sprintf("%d virtual servers differ from the model, such as %v", len(wrong), wrong[:min(5, len(wrong))])
		})
		return time.Since(begin)
	}
	converge("the first sync")
	rss0, err := procStatusKiB(d.pid(), "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync %v after the daemon's start; daemon RSS %d MiB", firstSync.Round(time.Millisecond), rss0/1024)

	// The daemon rereads the whole kernel once a sync period; the memory
	// that takes is part of its steady state, so the churn starts after
	// the first such sync.
	const fullCount = "kubeproxy_sync_full_proxy_rules_duration_seconds_count"
	fulls := d.metrics(t).sum(fullCount)
	eventuallyKernel(t, d, 10*time.Minute, "a periodic full sync", func() string {
		if d.metrics(t).sum(fullCount) == fulls {
			return fmt.Sprintf("%v full syncs", fulls)
		}
		return ""
	})
	m0 := d.metrics(t)
	var samples []int
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tick.C:
				if kb, err := procStatusKiB(d.pid(), "VmRSS"); err == nil {
					samples = append(samples, kb)
				}
			}
		}
	}()

	// Changes are issued at the rate by a ticker and carried out by
	// workers, so a slow API call delays no other; a change still waiting
	// when the next is due shows as a rate below the one asked for.
	changes := make(chan struct{}, 4*int(p.rate)+1)
	var done, failed atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	// How long the API server takes to accept a change: the trigger time
	// is stamped before the write, so this is part of the programming
	// latency the daemon reports.
	var writes []time.Duration
	for range 64 {
		wg.Go(func() {
			for range changes {
				begin := time.Now()
				err := s.change(ctx)
				took := time.Since(begin)
				errMu.Lock()
				writes = append(writes, took)
				errMu.Unlock()
				if err != nil {
					if failed.Add(1) == 1 {
						errMu.Lock()
						firstErr = err
						errMu.Unlock()
					}
					continue
				}
				done.Add(1)
			}
		})
	}
	churnStart := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.rate))
	for time.Since(churnStart) < p.duration {
		<-tick.C
		changes <- struct{}{}
	}
	tick.Stop()
	close(changes)
	wg.Wait()
	churn := time.Since(churnStart)
	close(sampling)
	<-sampled
	if n := failed.Load(); n > 0 {
		t.Errorf("%d changes failed at the API server, the first: %v", n, firstErr)
	}
	slices.Sort(writes)
	writeP50, writeP99 := writes[len(writes)/2], writes[len(writes)*99/100]
	t.Logf("churn: %d changes in %v (%.1f/s, asked %.0f/s): %v; the API server took p50 %v p99 %v per change",
		done.Load(), churn.Round(time.Millisecond), float64(done.Load())/churn.Seconds(), p.rate, s.counts,
		writeP50.Round(time.Millisecond), writeP99.Round(time.Millisecond))

	caughtUp := converge("every change programmed")
	m1 := d.metrics(t)
	t.Logf("the kernel equals the model %v after the last change", caughtUp.Round(time.Millisecond))

	if len(samples) < 3 {
		t.Fatalf("only %d RSS samples", len(samples))
	}
	third := len(samples) / 3
	first, last := meanKiB(samples[:third]), meanKiB(samples[len(samples)-third:])
	peak := 0
	for _, kb := range samples {
		peak = max(peak, kb)
	}
	growth := (last - first) / first * 100
	var series []string
	for i := 0; i < len(samples); i += max(1, len(samples)/12) {
		series = append(series, strconv.Itoa(samples[i]/1024))
	}
	// With GOGC=100 the heap goal is twice the heap live after the last
	// collection.
	t.Logf("daemon RSS over the churn (%d samples): first third %.1f MiB, last third %.1f MiB (%+.1f%%), peak %.1f MiB; MiB over time %s; live heap after GC %.1f -> %.1f MiB",
		len(samples), first/1024, last/1024, growth, float64(peak)/1024, strings.Join(series, " "),
		m0.sum("go_memstats_next_gc_bytes")/2/(1<<20), m1.sum("go_memstats_next_gc_bytes")/2/(1<<20))
	if last > first*1.10 {
		t.Errorf("memory grew by %.1f%% over the churn (more than 10%%)", growth)
	}

	buckets := m1.histogram("kubeproxy_network_programming_duration_seconds", m0)
	var observed float64
	if len(buckets) > 0 {
		observed = buckets[len(buckets)-1].count
	}
	p50, p99 := histQuantile(0.5, buckets), histQuantile(0.99, buckets)
	syncs := m1.sum("kubeproxy_sync_proxy_rules_duration_seconds_count") - m0.sum("kubeproxy_sync_proxy_rules_duration_seconds_count")
	syncBuckets := m1.histogram("kubeproxy_sync_proxy_rules_duration_seconds", m0)
	fullSyncs := m1.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_count") - m0.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_count")
	if fullSyncs > 0 {
		t.Logf("%v periodic full syncs (they reread the kernel) during the churn, %.1fs each on average",
			fullSyncs, (m1.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_sum")-m0.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_sum"))/fullSyncs)
	}
	t.Logf("network programming latency (kubeproxy_network_programming_duration_seconds, %v EndpointSlice changes): p50 %.2fs p99 %.2fs; %v syncs (p50 %.3fs p99 %.3fs), kernel operations %v",
		observed, p50, p99, syncs, histQuantile(0.5, syncBuckets), histQuantile(0.99, syncBuckets), m1.opsDelta(m0))
	if observed == 0 {
		t.Error("no network programming latency observed")
	}
	if got := m1.sum("ipvsplane_sync_failures_total"); got != 0 {
		t.Errorf("%v failed syncs", got)
	}
	t.Logf("SOAK services=%d endpoints=%d rate=%.0f/s duration=%v: created in %v, first sync %v, changes %d (%.1f/s), caught up %v after, RSS %.1f -> %.1f MiB (%+.1f%%, peak %.1f), programming latency p50 %.2fs p99 %.2fs (API writes p50 %v p99 %v)",
		p.services, p.endpoints, p.rate, p.duration, created.Round(time.Second), firstSync.Round(time.Millisecond),
		done.Load(), float64(done.Load())/churn.Seconds(), caughtUp.Round(time.Millisecond),
		first/1024, last/1024, growth, float64(peak)/1024, p50, p99, writeP50.Round(time.Millisecond), writeP99.Round(time.Millisecond))
}
