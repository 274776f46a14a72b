//go:build vmtest

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
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
	// rounds is how many times each path is loaded per proxy, the proxies
	// taking turns path by path (IPVSPLANE_DATAPLANE_ROUNDS, default 1): one
	// emulated window differs from the next by tens of percent.
	rounds int
	// perf adds a round under a system-wide CPU profile of the guest
	// (perf record, IPVSPLANE_DATAPLANE_PERF=1) and prints the kernel
	// functions each proxy's connections spent the CPU in; its rates are
	// not in the table.
	perf bool
}

func dataPlaneParamsFromEnv(t *testing.T) dataPlaneParams {
	t.Helper()
	p := dataPlaneParams{sizes: []int{100}, proxies: []string{"ipvsplane"}, duration: 2 * time.Second, workers: 4, rounds: 1}
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
		{"IPVSPLANE_DATAPLANE_ROUNDS", func(s string) (err error) { p.rounds, err = strconv.Atoi(s); return }},
		{"IPVSPLANE_DATAPLANE_PERF", func(s string) (err error) { p.perf, err = strconv.ParseBool(s); return }},
	} {
		if s := os.Getenv(v.env); s != "" {
			if err := v.set(s); err != nil {
				t.Fatalf("%s=%q: %v", v.env, s, err)
			}
		}
	}
	if !slices.IsSorted(p.sizes) || p.sizes[0] < 1 || p.duration <= 0 || p.workers < 1 || p.rounds < 1 {
		t.Fatalf("data-plane benchmark parameters out of range: %+v", p)
	}
	for _, name := range p.proxies {
		if _, ok := soakProxy(name); !ok {
			t.Fatalf("IPVSPLANE_DATAPLANE_PROXIES: no proxy %q", name)
		}
	}
	if p.perf {
		testutil.RequireProgram(t, "perf")
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
		var nodes []*dataPlaneNode
		for _, name := range p.proxies {
			index++
			nodes = append(nodes, setupDataPlane(t, quietProxy(name), index, size, kubeconfig))
		}
		rows = append(rows, loadDataPlane(t, p, nodes, target)...)
		for _, n := range nodes {
			if err := n.pp.stop(); err != nil {
				t.Fatal(err)
			}
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
	// lats are the connect latencies, sorted; rates the rate of each round.
	lats  []time.Duration
	rates []float64
}

// dataPlaneNode is one proxy's node, synced, with the client and the
// backend linked to it.
type dataPlaneNode struct {
	proxy    benchProxy
	pp       *proxyProc
	client   *testutil.NetNS
	size     int
	firstRun time.Duration
}

// setupDataPlane starts proxy in a new node namespace, waits for its first
// sync, and links a client and a backend namespace to the node.
func setupDataPlane(t *testing.T, proxy benchProxy, index, size int, kubeconfig string) *dataPlaneNode {
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
	// As in the soak: kube-proxy's IPVS mode takes minutes for 10,000
	// services in this VM.
	first, err := pp.waitFirstSync(t.Context(), 2*time.Minute+time.Duration(size)*100*time.Millisecond)
	if err != nil {
		t.Fatalf("%s: %v", proxy.name, err)
	}
	return &dataPlaneNode{proxy: proxy, pp: pp, client: client, size: size, firstRun: first}
}

// dataPlanePath is one of the target's addresses.
type dataPlanePath struct{ name, addr string }

// loadDataPlane loads each of the target's addresses through each node,
// p.rounds times, the nodes taking turns path by path, then once more under
// perf if asked. It returns a row per node, each path's rounds summed up.
func loadDataPlane(t *testing.T, p dataPlaneParams, nodes []*dataPlaneNode, target *corev1.Service) []dataPlaneRow {
	t.Helper()
	paths := []dataPlanePath{
		{"ClusterIP", net.JoinHostPort(target.Spec.ClusterIP, "80")},
		{"NodePort", net.JoinHostPort(dpNodeIP, strconv.Itoa(int(target.Spec.Ports[0].NodePort)))},
		{"LoadBalancer+ranges", net.JoinHostPort(dpLBIP, "80")},
	}
	for _, n := range nodes {
		for _, path := range paths {
			if err := waitServed(t.Context(), n.client, path.addr); err != nil {
				t.Fatalf("%s: %s %s never answered: %v\n%s", n.proxy.name, path.name, path.addr, err, tail(n.pp.log, 40))
			}
		}
	}
	rows := make([]dataPlaneRow, len(nodes))
	for i, n := range nodes {
		rows[i] = dataPlaneRow{proxy: n.proxy.name, size: n.size, firstRun: n.firstRun, paths: make([]pathResult, len(paths))}
	}
	for round := range p.rounds {
		for j, path := range paths {
			for i, n := range nodes {
				r := n.load(t, p, path)
				t.Logf("%s at %d services, round %d: %s: %d connections in %v (%.0f/s), connect p50 %v p99 %v; the proxy meanwhile %.2f CPU s",
					n.proxy.name, n.size, round+1, path.name, r.conns, p.duration, r.rate, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.proxyCPU.Seconds())
				rows[i].paths[j] = rows[i].paths[j].add(r, p.duration*time.Duration(round+1))
			}
		}
	}
	if p.perf {
		for _, path := range paths {
			for _, n := range nodes {
				n.profile(t, p, path)
			}
		}
	}
	return rows
}

// load loads one path through the node for p.duration; every connection
// must succeed.
func (n *dataPlaneNode) load(t *testing.T, p dataPlaneParams, path dataPlanePath) pathResult {
	t.Helper()
	cpu0 := cpuTime(t, n.pp)
	r := loadConnections(t.Context(), n.client, path.addr, p.workers, p.duration)
	r.path, r.proxyCPU = path.name, cpuTime(t, n.pp)-cpu0
	if r.failed > 0 {
		t.Errorf("%s: %d of %d connections to the %s %s failed: %v", n.proxy.name, r.failed, r.conns+r.failed, path.name, path.addr, r.errs)
	}
	return r
}

// add sums up round r into the rounds so far (sum), which together took
// total: the rate over all of them, the latencies of all.
func (sum pathResult) add(r pathResult, total time.Duration) pathResult {
	sum.path = r.path
	sum.conns += r.conns
	sum.failed += r.failed
	sum.proxyCPU += r.proxyCPU
	sum.rates = append(sum.rates, r.rate)
	sum.rate = float64(sum.conns) / total.Seconds()
	sum.lats = append(sum.lats, r.lats...)
	slices.Sort(sum.lats)
	sum.p50, sum.p99 = percentile(sum.lats, 50), percentile(sum.lats, 99)
	return sum
}

// percentile returns the q-th percentile of sorted latencies, 0 for none.
func percentile(sorted []time.Duration, q int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*q/100)]
}

// profile loads one path through the node under perf record, system-wide
// (a connection's packets cross the client's, the node's and the
// backend's namespaces, all in the kernel), and logs where the CPU went,
// by kernel and program function.
func (n *dataPlaneNode) profile(t *testing.T, p dataPlaneParams, path dataPlanePath) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "perf.data")
	rec := exec.CommandContext(t.Context(), "perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-a", "-g", "-o", data,
		"--", "sleep", strconv.Itoa(int(p.duration.Seconds())+1))
	var out strings.Builder
	rec.Stdout, rec.Stderr = &out, &out
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	r := loadConnections(t.Context(), n.client, path.addr, p.workers, p.duration)
	if err := rec.Wait(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out.String())
	}
	rep, err := exec.CommandContext(t.Context(), "perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
		"--sort", "sym", "--percent-limit", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("perf report: %v\n%s", err, rep)
	}
	t.Logf("PERF %s at %d services, %s under perf (%.0f conn/s): the guest's CPU by part, system-wide:\n%s",
		n.proxy.name, n.size, path.name, r.rate, perfParts(string(rep)))
}

// perfParts sums a perf report's symbols (lines like "  0.05%  [k]
// ip_vs_in_hook") into the parts of a connection's path, and lists the
// netfilter parts' heaviest functions: a connection's packets are a small
// share of an emulated guest's CPU, below any per-function cut.
func perfParts(report string) string {
	parts := []struct{ name, prefixes string }{
		{"idle", "native_safe_halt default_idle cpuidle do_idle"},
		{"IPVS", "ip_vs_ __ip_vs_"},
		{"nftables", "nft_ nf_tables __nft_"},
		{"conntrack", "nf_conntrack __nf_conntrack nf_ct_ __nf_ct_ nf_confirm ipv4_confirm"},
		{"NAT", "nf_nat __nf_nat masquerade nf_xfrm"},
		{"ipset", "ip_set hash_ip hash_net bitmap_ip"},
		{"iptables", "ipt_ ip6t_ xt_ ebt_"},
		{"other netfilter", "nf_ __nf_ nf_hook"},
		{"TCP", "tcp_ __tcp_ inet_csk"},
		{"IP and routing", "ip_ __ip_ inet_ fib_ dst_ ipv4_ rt_"},
	}
	sums := map[string]float64{}
	var total, idle float64
	type fn struct {
		part, name string
		pct        float64
	}
	var netfilter []fn
	for line := range strings.Lines(report) {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasSuffix(f[0], "%") {
			continue
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		if err != nil {
			continue
		}
		total += pct
		part := "other kernel"
		if f[1] != "[k]" {
			part = "programs"
		} else {
		match:
			for _, p := range parts {
				for pre := range strings.FieldsSeq(p.prefixes) {
					if strings.HasPrefix(f[2], pre) {
						part = p.name
						break match
					}
				}
			}
		}
		sums[part] += pct
		switch part {
		case "idle":
			idle += pct
		case "IPVS", "nftables", "conntrack", "NAT", "ipset", "iptables", "other netfilter":
			netfilter = append(netfilter, fn{part, f[2], pct})
		}
	}
	busy := total - idle
	var b strings.Builder
	fmt.Fprintf(&b, "idle %.1f%% of the samples; of the rest:", idle)
	for _, p := range append(parts[1:], struct{ name, prefixes string }{"other kernel", ""}, struct{ name, prefixes string }{"programs", ""}) {
		if busy > 0 {
			fmt.Fprintf(&b, " %s %.2f%%,", p.name, 100*sums[p.name]/busy)
		}
	}
	slices.SortFunc(netfilter, func(a, b fn) int { return cmp.Compare(b.pct, a.pct) })
	b.WriteString("\nnetfilter's heaviest, % of the busy samples:")
	for _, f := range netfilter[:min(len(netfilter), 15)] {
		fmt.Fprintf(&b, " %s %.2f%%,", f.name, 100*f.pct/busy)
	}
	return b.String()
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
	r := pathResult{conns: len(lats), errs: errs, rate: float64(len(lats)) / d.Seconds(), lats: lats}
	for _, n := range errs {
		r.failed += n
	}
	r.p50, r.p99 = percentile(lats, 50), percentile(lats, 99)
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
