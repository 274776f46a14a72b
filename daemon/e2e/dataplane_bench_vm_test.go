//go:build vmtest

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/kubetest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dataPlaneParams size the data-plane benchmark: the numbers of services
// installed, the proxies, how long each address is loaded and by how
// many connections at once.
type dataPlaneParams struct {
	sizes    []int
	proxies  []string
	duration time.Duration
	workers  int
}

func dataPlaneParamsFromEnv(t *testing.T) dataPlaneParams {
	t.Helper()
	p := dataPlaneParams{sizes: []int{100}, proxies: []string{"ipvsplane"}, duration: 2 * time.Second, workers: 4}
	for _, v := range []struct {
		env string
		set func(string) error
	}{
		{"IPVSPLANE_DATAPLANE_SIZES", func(s string) error {
			p.sizes = nil
			for f := range strings.SplitSeq(s, ",") {
				n, err := strconv.Atoi(f)
				if err != nil {
					return err
				}
				p.sizes = append(p.sizes, n)
			}
			return nil
		}},
		{"IPVSPLANE_DATAPLANE_PROXIES", func(s string) error { p.proxies = strings.Split(s, ","); return nil }},
		{"IPVSPLANE_DATAPLANE_DURATION", func(s string) (err error) { p.duration, err = time.ParseDuration(s); return }},
		{"IPVSPLANE_DATAPLANE_WORKERS", func(s string) (err error) { p.workers, err = strconv.Atoi(s); return }},
	} {
		if s := os.Getenv(v.env); s != "" {
			if err := v.set(s); err != nil {
				t.Fatalf("%s=%q: %v", v.env, s, err)
			}
		}
	}
	if !slices.IsSorted(p.sizes) || p.sizes[0] < 1 || p.duration <= 0 || p.workers < 1 {
		t.Fatalf("data-plane benchmark parameters out of range: %+v", p)
	}
	for _, name := range p.proxies {
		if _, ok := soakProxy(name); !ok {
			t.Fatalf("IPVSPLANE_DATAPLANE_PROXIES: no proxy %q", name)
		}
	}
	return p
}

// The target service the benchmark's client loads: a LoadBalancer whose
// source ranges admit the client, backed by a server namespace behind the
// node.
const (
	dpTarget     = "dp-target"
	dpLBIP       = "192.0.2.80"
	dpClientNet  = "10.201.0"
	dpBackendNet = "10.244.250"
	// dpNodeIP is the Node object's InternalIP.
	dpNodeIP = "10.0.2.15"
)

// The data-plane benchmark (issue 28): with N services installed through
// the API server, each proxy in turn programs a namespace of its own (the
// node), and a client namespace behind the node opens short TCP
// connections (connect, read the server's line, close) to one service as
// fast as its workers can: through the ClusterIP, a NodePort of the node
// and a load balancer IP with source ranges. It reports connections per
// second and connect latency (SYN to SYN-ACK, and the ACK) p50 and p99,
// side by side, as ratios to ipvsplane; every connection must succeed.
// make test runs it small (100 services, ipvsplane); make bench-dataplane
// at 1,000, 10,000 and 30,000 with kube-proxy's IPVS, nftables and
// iptables modes.
func TestDataPlaneBench(t *testing.T) {
	p := dataPlaneParamsFromEnv(t)
	for _, prog := range []string{"nft", "ip"} {
		testutil.RequireProgram(t, prog)
	}
	f := newKubeFixture(t, "e2e-dataplane")
	s := &soak{f: f, rng: rand.New(rand.NewPCG(3, 4)), ips: map[string]bool{}, counts: map[string]int{}}
	target := createTarget(t, f)
	f.setNodeAddresses(soakNode, dpNodeIP)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, f.cp.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	var rows []dataPlaneRow
	index := 0
	for _, size := range p.sizes {
		created := len(s.services) + 1 // the target
		s.populate(t, soakParams{services: size - created, endpoints: 1})
		for _, name := range p.proxies {
			proxy := quietProxy(name)
			index++
			rows = append(rows, runDataPlane(t, p, proxy, index, size, kubeconfig, target))
		}
	}
	t.Log(dataPlaneTable(p, rows))
}

// quietProxy is the soak's proxy of that name with its periodic sync
// put off for an hour: a periodic sync of 10,000 services (ipvsplane's
// background read of the kernel, kube-proxy's IPVS mode's full sync)
// takes tens of seconds of the emulated guest's CPU, and would measure
// the proxy's sync beside the packets' path. What the proxy spends on
// each path is reported beside it.
func quietProxy(name string) benchProxy {
	p, _ := soakProxy(name)
	period := "--iptables-sync-period=1h"
	if p.ipvs {
		period = "--ipvs-sync-period=1h"
	}
	p.args = withArgs(p.args, period)
	return p
}

// createTarget creates the target service and its slice: one endpoint at
// the backend namespace's address.
func createTarget(t *testing.T, f *kubeFixture) *corev1.Service {
	t.Helper()
	svc := kubetest.Service(f.ns, dpTarget, corev1.ServiceTypeLoadBalancer, 80)
	svc.Spec.LoadBalancerSourceRanges = []string{dpClientNet + ".0/24"}
	svc, err := f.client.CoreV1().Services(f.ns).Create(f.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: dpLBIP}}
	if svc, err = f.client.CoreV1().Services(f.ns).UpdateStatus(f.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.putSlice(dpTarget, dpTarget+"-1", 8080, dpBackendNet+".2")
	return svc
}

// dataPlaneRow is what one proxy's data plane did at one size.
type dataPlaneRow struct {
	proxy    string
	size     int
	firstRun time.Duration
	paths    []pathResult
}

// pathResult is one address's load.
type pathResult struct {
	path   string
	conns  int
	failed int
	// errs counts the failures by their error, the address's port
	// numbers taken out (each connection has its own).
	errs     map[string]int
	rate     float64
	p50, p99 time.Duration
	// proxyCPU is the CPU the proxy used while the path was loaded.
	proxyCPU time.Duration
}

// runDataPlane starts proxy in a new node namespace, waits for its first
// sync, links a client and a backend namespace to the node, and loads
// each of the target's addresses in turn.
func runDataPlane(t *testing.T, p dataPlaneParams, proxy benchProxy, index, size int, kubeconfig string, target *corev1.Service) dataPlaneRow {
	t.Helper()
	node := benchNet(t, index)
	client, backend := testutil.NewNetNS(t), testutil.NewNetNS(t)
	node.Link(t, "dpc", client, "eth0", dpClientNet+".1/24", dpClientNet+".2/24")
	// The client keeps each connection's port in TIME_WAIT for a minute
	// (it closes first): room for some 1,000 connections a second.
	if err := client.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("1024 65535"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	// The node's InternalIP, on which nftables mode serves node ports by
	// default (--nodeport-addresses primary), and the client reaches
	// through the node.
	node.IP(t, "addr", "add", dpNodeIP+"/32", "dev", "dpc")
	node.Link(t, "dpb", backend, "eth0", dpBackendNet+".1/24", dpBackendNet+".2/24")
	// The client closes first: with the server closing first, thousands
	// of connections a path leave the backend's sockets in TIME_WAIT for
	// a minute, and a later masqueraded connection that lands on one of
	// their tuples goes unanswered (a few in 6,000 did, under every proxy).
	backend.ServeLine(t, dpBackendNet+".2:8080", dpAnswer)
	pp := startProxy(t, proxy, node, kubeconfig, t.TempDir())
	defer pp.stop()
	// As in the soak: kube-proxy's IPVS mode takes minutes for 10,000
	// services in this VM.
	first, err := pp.waitFirstSync(t.Context(), 2*time.Minute+time.Duration(size)*100*time.Millisecond)
	if err != nil {
		t.Fatalf("%s: %v", proxy.name, err)
	}
	row := dataPlaneRow{proxy: proxy.name, size: size, firstRun: first}
	for _, path := range []struct{ name, addr string }{
		{"ClusterIP", net.JoinHostPort(target.Spec.ClusterIP, "80")},
		{"NodePort", net.JoinHostPort(dpNodeIP, strconv.Itoa(int(target.Spec.Ports[0].NodePort)))},
		{"LoadBalancer+ranges", net.JoinHostPort(dpLBIP, "80")},
	} {
		if err := waitServed(t.Context(), client, path.addr); err != nil {
			t.Fatalf("%s: %s %s never answered: %v\n%s", proxy.name, path.name, path.addr, err, tail(pp.log, 40))
		}
		cpu0 := cpuTime(t, pp)
		r := loadConnections(t.Context(), client, path.addr, p.workers, p.duration)
		r.path, r.proxyCPU = path.name, cpuTime(t, pp)-cpu0
		if r.failed > 0 {
			t.Errorf("%s: %d of %d connections to the %s %s failed: %v", proxy.name, r.failed, r.conns+r.failed, path.name, path.addr, r.errs)
		}
		t.Logf("%s: %s: %d connections in %v (%.0f/s), connect p50 %v p99 %v; the proxy meanwhile %.2f CPU s", proxy.name, path.name, r.conns, p.duration, r.rate,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.proxyCPU.Seconds())
		row.paths = append(row.paths, r)
	}
	return row
}

// waitServed waits until a connection to addr from ns is answered.
func waitServed(ctx context.Context, ns *testutil.NetNS, addr string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := ns.Do(func() error { _, err := connectOnce(addr); return err })
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// connectOnce opens a connection to addr, reads the server's line and
// closes it; it returns how long the connect took.
func connectOnce(addr string) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return took, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != dpAnswer {
		err = fmt.Errorf("answer %q", line)
	}
	return took, err
}

// dpAnswer is the backend's line.
const dpAnswer = "backend\n"

// portless matches the port of an address in an error, which differs
// from one connection to the next.
var portless = regexp.MustCompile(`:[0-9]+\b`)

// loadConnections opens connections to addr from ns with workers at once
// for d, and sums them up.
func loadConnections(ctx context.Context, ns *testutil.NetNS, addr string, workers int, d time.Duration) pathResult {
	var mu sync.Mutex
	var lats []time.Duration
	errs := map[string]int{}
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range workers {
		wg.Go(func() {
			var mine []time.Duration
			bad := map[string]int{}
			_ = ns.Do(func() error {
				for time.Now().Before(end) && ctx.Err() == nil {
					took, err := connectOnce(addr)
					if err != nil {
						bad[fmt.Sprintf("after %v: %v", took.Round(100*time.Millisecond), portless.ReplaceAllString(err.Error(), ":N"))]++
						continue
					}
					mine = append(mine, took)
				}
				return nil
			})
			mu.Lock()
			lats = append(lats, mine...)
			for e, n := range bad {
				errs[e] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lats)
	r := pathResult{conns: len(lats), errs: errs, rate: float64(len(lats)) / d.Seconds()}
	for _, n := range errs {
		r.failed += n
	}
	if len(lats) > 0 {
		r.p50, r.p99 = lats[len(lats)/2], lats[min(len(lats)-1, len(lats)*99/100)]
	}
	return r
}

// dataPlaneTable prints the rows as a table per size, with each proxy's
// ratio to ipvsplane's in the same run.
func dataPlaneTable(p dataPlaneParams, rows []dataPlaneRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DATAPLANE workers=%d duration=%v (ratio to ipvsplane at the same size in parentheses)\n", p.workers, p.duration)
	b.WriteString("| services | proxy | path | conn/s | connect p50 | connect p99 | proxy CPU s meanwhile | first sync |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		var ref *dataPlaneRow
		for i := range rows {
			if rows[i].size == r.size && rows[i].proxy == "ipvsplane" {
				ref = &rows[i]
			}
		}
		for i, pr := range r.paths {
			ratio := func(v, base float64) string {
				if ref == nil || base == 0 {
					return ""
				}
				return fmt.Sprintf(" (%.2gx)", v/base)
			}
			var base pathResult
			if ref != nil {
				base = ref.paths[i]
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %.0f%s | %v%s | %v%s | %.2f | %v |\n", r.size, r.proxy, pr.path,
				pr.rate, ratio(pr.rate, base.rate),
				pr.p50.Round(time.Microsecond), ratio(float64(pr.p50), float64(base.p50)),
				pr.p99.Round(time.Microsecond), ratio(float64(pr.p99), float64(base.p99)),
				pr.proxyCPU.Seconds(), r.firstRun.Round(time.Millisecond))
		}
	}
	return b.String()
}
