//go:build vmtest

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/daemontest"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// Helpers of the tests in which the ipvsplane program follows the real
// API server: the daemon in the guest's root network namespace (the only
// one that reaches the API server, through qemu's forward at 10.0.2.100), its /metrics, and the
// kernel as ipvsadm, ipset, ip and nft read it.

// kubeDaemon is `ipvsplane run` following the control plane.
type kubeDaemon struct {
	*daemontest.Daemon
	metricsAddr string
}

// startKubeDaemon runs the daemon in the root namespace as node, with
// --kubeconfig from the control plane, after cleaning up what an earlier
// test may have left. When the test ends it is stopped and its kernel
// state cleaned up.
func startKubeDaemon(t testing.TB, cp *controlplane.Remote, node string, extra ...string) *kubeDaemon {
	t.Helper()
	testutil.RequireProgram(t, "ipvsplane")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanupKernel(t)
	stateFile := filepath.Join(dir, "status.json")
	d := &kubeDaemon{metricsAddr: testsMetricsAddr}
	args := append([]string{"run", "--kubeconfig", kubeconfig, "--hostname-override", node,
		"--cluster-cidr=10.244.0.0/16", "--ipvs-min-sync-period=1s",
		"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=" + d.metricsAddr,
		"--state-file", stateFile}, extra...)
	var err error
	if d.Daemon, err = daemontest.Start(exec.Command("ipvsplane", args...), nil, stateFile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.Proc.Exited() {
			if err := d.Stop(); err != nil {
				t.Errorf("stopping the daemon: %v", err)
			}
		}
		if t.Failed() {
			out := d.Out.String()
			t.Logf("daemon output (last 8 KiB):\n%s", out[max(0, len(out)-8192):])
		}
		cleanupKernel(t)
	})
	return d
}

// cleanupKernel removes what ipvsplane programs in the root namespace.
func cleanupKernel(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("ipvsplane", "cleanup", "--state-file=").CombinedOutput(); err != nil {
		t.Fatalf("ipvsplane cleanup: %v\n%s", err, out)
	}
}

// alive fails the test if the daemon has exited.
func (d *kubeDaemon) alive(t testing.TB) {
	t.Helper()
	if d.Proc.Exited() {
		t.Fatalf("the daemon exited: %v\n%s", d.Proc.Err(), d.Out.String())
	}
}

// metrics scrapes the daemon's /metrics.
func (d *kubeDaemon) metrics(t testing.TB) promText {
	t.Helper()
	p, err := fetchMetrics(d.metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testsMetricsAddr is the metrics address the tests give the proxy they
// run in the guest's own namespace (metricsBindAddress).
const testsMetricsAddr = "127.0.0.1:10249"

// fetchMetrics scrapes the /metrics page of the proxy serving on addr.
func fetchMetrics(addr string) (promText, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("/metrics on %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("/metrics on %s: %w", addr, err)
	}
	return parseProm(string(body)), nil
}

// promText is a scrape: each sample's value by its name with labels, as
// written ("a_total{op=\"bind\"}").
type promText map[string]float64

func parseProm(body string) promText {
	p := promText{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			p[line[:i]] = v
		}
	}
	return p
}

// ipv6Series marks the samples of kube-proxy's IPv6 proxier, and the
// copies of ipvsplane's, which records each sync under both families: the
// sums and histograms here take one family (IPv4), so that both proxies
// count each sync once.
const ipv6Series = `ip_family="IPv6"`

// sum adds up the samples of a metric over all its labels but the IPv6
// family's.
func (p promText) sum(name string) float64 {
	var s float64
	for k, v := range p {
		if (k == name || strings.HasPrefix(k, name+"{")) && !strings.Contains(k, ipv6Series) {
			s += v
		}
	}
	return s
}

// byLabel returns a labelled metric's samples by their labels
// ("op=\"bind\"").
func (p promText) byLabel(name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range p {
		if rest, ok := strings.CutPrefix(k, name+"{"); ok {
			out[strings.TrimSuffix(rest, "}")] = v
		}
	}
	return out
}

// opsDelta is the change of each kernel operation count from before to
// p, without the kinds that did not change.
func (p promText) opsDelta(before promText) map[string]float64 {
	out := map[string]float64{}
	prev := before.byLabel("ipvsplane_sync_operations_total")
	for k, v := range p.byLabel("ipvsplane_sync_operations_total") {
		if d := v - prev[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// histBucket is one cumulative histogram bucket.
type histBucket struct {
	le    float64
	count float64
}

// histogram returns a histogram's cumulative buckets, less those of
// before (nil for none), in order.
func (p promText) histogram(name string, before promText) []histBucket {
	var out []histBucket
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, name+"_bucket{")
		if !ok {
			continue
		}
		if rest, ok = strings.CutPrefix(strings.TrimPrefix(rest, `ip_family="IPv4",`), `le="`); !ok {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest, "\"}"), 64)
		if err != nil {
			continue
		}
		out = append(out, histBucket{le, v - before[k]})
	}
	slices.SortFunc(out, func(a, b histBucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	return out
}

// histQuantile estimates the q-quantile of cumulative buckets by linear
// interpolation inside the bucket that holds it, as Prometheus's
// histogram_quantile does; NaN without observations.
func histQuantile(q float64, buckets []histBucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].count == 0 {
		return math.NaN()
	}
	total := buckets[len(buckets)-1].count
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return lower
}

// virtualServer is one IPVS virtual server as ipvsadm lists it, with its
// real servers sorted ("10.244.1.2:8080 1").
type virtualServer struct {
	proto string // "tcp", "udp", "sctp"
	addr  netip.AddrPort
	sched string
	reals []string
}

// ipvsadmTable reads the IPVS table with ipvsadm -Sn, keyed by
// inet.VirtualServer's name: "TCP 10.96.0.10:80".
func ipvsadmTable(t testing.TB) map[string]*virtualServer {
	t.Helper()
	testutil.RequireProgram(t, "ipvsadm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ipvsadm", "-S", "-n").Output()
	if err != nil {
		t.Fatalf("ipvsadm -Sn: %v", err)
	}
	table, err := parseIPVSSave(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// parseIPVSSave parses ipvsadm -Sn's output: "-A -t 10.96.0.10:80 -s rr"
// for a virtual server, "-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1"
// for a real server.
func parseIPVSSave(out string) (map[string]*virtualServer, error) {
	table := map[string]*virtualServer{}
	protos := map[string]inet.Protocol{"-t": inet.TCP, "-u": inet.UDP, "--sctp-service": inet.SCTP}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		proto, ok := protos[f[1]]
		if !ok {
			continue
		}
		addr, err := netip.ParseAddrPort(f[2])
		if err != nil {
			return nil, fmt.Errorf("ipvsadm line %q: %v", line, err)
		}
		key := inet.VirtualServer(proto, addr.Addr(), addr.Port())
		flag := func(name string) string {
			if i := slices.Index(f, name); i >= 0 && i+1 < len(f) {
				return f[i+1]
			}
			return ""
		}
		switch f[0] {
		case "-A":
			table[key] = &virtualServer{proto: proto.String(), addr: addr, sched: flag("-s")}
		case "-a":
			vs := table[key]
			if vs == nil {
				return nil, fmt.Errorf("ipvsadm: real server before its virtual server: %q", line)
			}
			vs.reals = append(vs.reals, flag("-r")+" "+flag("-w"))
		}
	}
	for _, vs := range table {
		slices.Sort(vs.reals)
	}
	return table, nil
}

// ipsetMembers lists a set's members with ipset list.
func ipsetMembers(t testing.TB, set string) []string {
	t.Helper()
	testutil.RequireProgram(t, "ipset")
	out, err := exec.Command("ipset", "list", set).Output()
	if err != nil {
		t.Fatalf("ipset list %s: %v", set, err)
	}
	_, members, _ := strings.Cut(string(out), "Members:\n")
	return strings.Fields(members)
}

// boundAddrs lists the addresses on kube-ipvs0 as ip reads them.
func boundAddrs(t testing.TB) []string {
	t.Helper()
	testutil.RequireProgram(t, "ip")
	out, err := exec.Command("ip", "-o", "addr", "show", "dev", "kube-ipvs0").Output()
	if err != nil {
		t.Fatalf("ip addr show dev kube-ipvs0: %v", err)
	}
	var addrs []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if i := slices.IndexFunc(f, func(s string) bool { return s == "inet" || s == "inet6" }); i >= 0 && i+1 < len(f) {
			addrs = append(addrs, f[i+1])
		}
	}
	return addrs
}

// eventuallyKernel polls cond until it holds or timeout passes; cond returns a
// description of what is still wrong, or "" when it holds. It waits for
// the daemon, it does not time it.
func eventuallyKernel(t testing.TB, d *kubeDaemon, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		wrong := cond()
		if wrong == "" {
			return
		}
		d.alive(t)
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %s", what, timeout, wrong)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubeNamespace creates a namespace for one test. The test control plane
// runs no namespace controller, so at the end the test deletes the
// Services and EndpointSlices in it rather than the namespace, which
// would stay Terminating.
func kubeNamespace(t testing.TB, client kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The soak's 10,000 services take minutes to delete on a loaded
		// machine.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		if err := client.DiscoveryV1().EndpointSlices(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the EndpointSlices of %s: %v", name, err)
		}
		// Services have no DeleteCollection.
		list, err := client.CoreV1().Services(name).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing the Services of %s: %v", name, err)
			return
		}
		names := make(chan string)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 32 {
			wg.Go(func() {
				for s := range names {
					err := client.CoreV1().Services(name).Delete(ctx, s, metav1.DeleteOptions{})
					if err != nil && !apierrors.IsNotFound(err) && failed.Add(1) == 1 {
						t.Errorf("deleting %s/%s: %v", name, s, err)
					}
				}
			})
		}
		for _, s := range list.Items {
			names <- s.Name
		}
		close(names)
		wg.Wait()
		if n := failed.Load(); n > 1 {
			t.Errorf("%d Services of %s not deleted", n, name)
		}
	})
}
