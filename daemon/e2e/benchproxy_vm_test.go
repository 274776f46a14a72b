//go:build vmtest

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// benchProxy is one of the proxies the benchmark compares: how to start
// it and how to tell that the kernel holds what it should.
type benchProxy struct {
	name string
	// args are the program and its arguments, given the kubeconfig file
	// and a directory of the proxy's own.
	args func(kubeconfig, dir string) []string
	// ipvs is true when the proxy programs IPVS, whose table the
	// benchmark reads back; otherwise it checks kube-proxy's nftables map
	// or iptables rules.
	ipvs bool
}

// holds checks that the kernel of ns holds every service of vips as the
// proxy programs them.
func (p benchProxy) holds(ctx context.Context, ns *testutil.NetNS, vips []netip.Addr, endpoints int) error {
	switch {
	case p.ipvs:
		return ipvsHolds(ctx, ns, vips, endpoints)
	case p.name == "kube-proxy-iptables":
		return iptablesHolds(ctx, ns, vips)
	}
	return nftablesHolds(ns, vips)
}

// The flags every proxy gets: the same node, cluster CIDR and sync
// periods (no periodic resync during a measurement), metrics where the
// benchmark reads them.
var benchCommonFlags = []string{
	"--hostname-override=" + benchNode, "--cluster-cidr=10.244.0.0/16",
	"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256",
}

// benchProxies are the proxies in the order they run: kube-proxy's IPVS
// mode first, the baseline.
var benchProxies = []benchProxy{
	{
		name: "kube-proxy-ipvs",
		ipvs: true,
		args: func(kubeconfig, _ string) []string {
			return append([]string{"kube-proxy", "--kubeconfig=" + kubeconfig, "--proxy-mode=ipvs",
				"--ipvs-sync-period=1h", "--ipvs-min-sync-period=1s",
				// nf_conntrack_max is read-only outside the root namespace.
				"--conntrack-max-per-core=0"}, benchCommonFlags...)
		},
	},
	{
		name: "kube-proxy-nftables",
		args: func(kubeconfig, _ string) []string {
			return append([]string{"kube-proxy", "--kubeconfig=" + kubeconfig, "--proxy-mode=nftables",
				"--iptables-sync-period=1h", "--iptables-min-sync-period=1s",
				"--conntrack-max-per-core=0"}, benchCommonFlags...)
		},
	},
	{
		name: "kube-proxy-iptables",
		args: func(kubeconfig, _ string) []string {
			return append([]string{"kube-proxy", "--kubeconfig=" + kubeconfig, "--proxy-mode=iptables",
				"--iptables-sync-period=1h", "--iptables-min-sync-period=1s",
				"--conntrack-max-per-core=0"}, benchCommonFlags...)
		},
	},
	{
		name: "ipvsplane",
		ipvs: true,
		args: func(kubeconfig, dir string) []string {
			return append([]string{"ipvsplane", "run", "--kubeconfig=" + kubeconfig,
				"--ipvs-sync-period=1h", "--ipvs-min-sync-period=1s",
				"--state-file=" + filepath.Join(dir, "status.json")}, benchCommonFlags...)
		},
	},
}

// benchNet is a network namespace of its own for each proxy, so none
// inherits another's kernel state (IPVS keeps deleted real servers in a
// per-namespace list that slows later additions). Its eth0 is routed and
// masqueraded through the guest's root namespace to the API server.
func benchNet(t testing.TB, index int) *testutil.NetNS {
	t.Helper()
	ns := testutil.NewNetNS(t)
	host := fmt.Sprintf("vbench%d", index)
	masq := fmt.Sprintf("e2e-bench-masquerade-%d", index)
	attachToRoot(t, host, ns, "eth0", fmt.Sprintf("10.200.%d.1/24", index), fmt.Sprintf("10.200.%d.2/24", index))
	if out, err := exec.Command("nft", fmt.Sprintf("add table ip %[1]s; "+
		"add chain ip %[1]s postrouting { type nat hook postrouting priority srcnat; }; "+
		"add rule ip %[1]s postrouting ip saddr 10.200.%[2]d.0/24 oifname eth0 masquerade", masq, index)).CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	// Later tests in the same guest compare the root namespace's rules:
	// leave none behind.
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "ip", masq).Run() })
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ns
}

// proxyProc is a running proxy.
type proxyProc struct {
	name  string
	proc  *testutil.Proc
	ns    *testutil.NetNS
	log   string
	start time.Time
	http  *http.Client
}

// startProxy starts p in ns, logging to a file in dir.
func startProxy(t testing.TB, p benchProxy, ns *testutil.NetNS, kubeconfig, dir string) *proxyProc {
	t.Helper()
	args := p.args(kubeconfig, dir)
	pp := &proxyProc{name: p.name, ns: ns, log: filepath.Join(dir, p.name+".log")}
	pp.http = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		// The metrics listen on the namespace's loopback.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() (err error) {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}}
	pp.start = time.Now()
	var err error
	if pp.proc, err = startLogged(ns, pp.log, args[0], args[1:]...); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	t.Cleanup(func() {
		_ = pp.stop()
		if t.Failed() {
			t.Logf("%s's last output:\n%s", p.name, tail(pp.log, 40))
		}
	})
	return pp
}

// stop sends SIGTERM and waits for the proxy to exit, killing it after
// a minute; only that is an error, not how it exited.
func (pp *proxyProc) stop() error {
	if err := pp.proc.Stop(time.Minute); errors.Is(err, testutil.ErrNotStopped) {
		return err
	}
	return nil
}

// metrics reads the proxy's metrics whose names are in want, by name
// (summed over labels).
func (pp *proxyProc) metrics(ctx context.Context, want ...string) (map[string]float64, error) {
	body, err := pp.scrape(ctx)
	if err != nil {
		return nil, err
	}
	p := parseProm(body)
	got := make(map[string]float64, len(want))
	for _, w := range want {
		got[w] = p.sum(w)
	}
	return got, nil
}

// scrape reads the proxy's metrics page.
func (pp *proxyProc) scrape(ctx context.Context) (string, error) {
	body, err := pp.get(ctx, "/metrics")
	return string(body), err
}

// get reads a page of the proxy's metrics address.
func (pp *proxyProc) get(ctx context.Context, path string) ([]byte, error) {
	return pp.getWith(ctx, pp.http, path)
}

// getWith is get through client: a CPU profile takes longer than
// pp.http's timeout.
func (pp *proxyProc) getWith(ctx context.Context, client *http.Client, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10249"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", pp.name, path, err)
	}
	return body, nil
}

// profileCPU takes a CPU profile of the proxy (ipvsplane with
// --profiling) over the next d, in the background, and prints it for
// hack/profiles to pick out of the log, named name. The returned function
// waits for it.
func (pp *proxyProc) profileCPU(t testing.TB, name string, d time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
		ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
		defer cancel()
		var data []byte
		client := *pp.http
		client.Timeout = 0 // ctx bounds it
		err := pp.poll(ctx, d+time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			var err error
			data, err = pp.getWith(ctx, &client, path)
			return err == nil, nil
		})
		if err != nil {
			t.Errorf("%s: CPU profile: %v", pp.name, err)
			return
		}
		testutil.PrintProfile(name, data)
	}()
	return func() { <-done }
}

// printHeapProfile prints the proxy's allocation profile (ipvsplane with
// --profiling): every allocation since its start, which two snapshots
// turn into a period's (go tool pprof -base).
func (pp *proxyProc) printHeapProfile(t testing.TB, name string) {
	data, err := pp.get(t.Context(), "/debug/pprof/allocs")
	if err != nil {
		t.Errorf("%s: allocation profile: %v", pp.name, err)
		return
	}
	testutil.PrintProfile(name, data)
}

// printLog prints the proxy's log so far, compressed, under name, for
// hack/profiles to write out: the guest has no other way out.
func (pp *proxyProc) printLog(t testing.TB, name string) {
	data, err := os.ReadFile(pp.log)
	if err != nil {
		t.Errorf("%s: %v", pp.name, err)
		return
	}
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.PrintProfile(name, b.Bytes())
}

const (
	metricLastSync     = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricSyncSum      = "kubeproxy_sync_proxy_rules_duration_seconds_sum"
	metricPrefillSum   = "ipvsplane_prefill_duration_seconds_sum"
	metricProgramSum   = "kubeproxy_network_programming_duration_seconds_sum"
	metricProgramCount = "kubeproxy_network_programming_duration_seconds_count"
)

// errExited reports a proxy that ended while it was waited on, and
// errNotDone one that did not do what was waited for in time.
var (
	errExited  = errors.New("exited")
	errNotDone = errors.New("not done")
)

// poll calls fn every interval until it returns true or an error, the
// proxy exits, or timeout passes.
func (pp *proxyProc) poll(ctx context.Context, timeout, interval time.Duration, fn func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		// An error is retried: the metrics server starts after the
		// process, and a loaded guest can be slow to answer.
		ok, err := fn(ctx)
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-pp.proc.Done():
			return fmt.Errorf("%s %w: %v", pp.name, errExited, pp.proc.Err())
		case <-ctx.Done():
			return fmt.Errorf("%s: %w within %v (last error: %v)", pp.name, errNotDone, timeout, last)
		case <-time.After(interval):
		}
	}
}

// waitFirstSync waits for the proxy's first successful sync and returns
// the time from the process's start to that sync's end, by the proxy's
// own clock (the guest's, as the start's).
func (pp *proxyProc) waitFirstSync(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start, _, _, err := pp.waitFirstSyncAlone(ctx, timeout)
	return start, err
}

// waitFirstSyncAlone is waitFirstSync that also returns how long the
// syncs themselves took by then (the sum of the proxy's
// kubeproxy_sync_proxy_rules_duration_seconds, which counts from the
// sync's start, after the listing, and of ipvsplane's prefills, the
// kernel writes while it listed, which prefills is alone): the rest of
// the time from the start went to starting and listing.
func (pp *proxyProc) waitFirstSyncAlone(ctx context.Context, timeout time.Duration) (fromStart, syncs, prefills time.Duration, err error) {
	var m map[string]float64
	err = pp.poll(ctx, timeout, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		m, err = pp.metrics(ctx, metricLastSync, metricSyncSum, metricPrefillSum)
		return m[metricLastSync] > 0, err
	})
	if err != nil {
		return 0, 0, 0, err
	}
	prefills = time.Duration(m[metricPrefillSum] * 1e9)
	return time.Unix(0, int64(m[metricLastSync]*1e9)).Sub(pp.start), time.Duration(m[metricSyncSum]*1e9) + prefills, prefills, nil
}

// programmed returns the proxy's network-programming latency sum and
// count.
func (pp *proxyProc) programmed(ctx context.Context) (sum, count float64, err error) {
	m, err := pp.metrics(ctx, metricProgramSum, metricProgramCount)
	return m[metricProgramSum], m[metricProgramCount], err
}

// peakRSS reads the proxy's peak resident memory (VmHWM) in MiB.
func (pp *proxyProc) peakRSS() (float64, error) {
	kb, err := procStatusKiB(pp.proc.Cmd.Process.Pid, "VmHWM")
	return float64(kb) / 1024, err
}

// rssSample is one reading of a process's resident memory, in KiB, and
// of it the anonymous pages (heap, stacks), at a time after the sampling
// began. The rest is the binary's pages and other mappings: in the
// guest, whose root is in RAM, they count as shared memory, not as file
// pages.
type rssSample struct {
	at        time.Duration
	rss, anon int
}

// String says the sample in MiB.
func (s rssSample) String() string {
	return fmt.Sprintf("%.1f MiB (anonymous %.1f, other %.1f) at %v", float64(s.rss)/1024, float64(s.anon)/1024, float64(s.rss-s.anon)/1024, s.at.Round(100*time.Millisecond))
}

// sampleRSSPeak reads the process's memory every 200 ms until stop is
// called, which returns the sample of the highest RSS: what the peak the
// kernel keeps (VmHWM) is made of, and when it came.
func sampleRSSPeak(pp *proxyProc) (stop func() rssSample) {
	var peak rssSample
	start := time.Now()
	stopTicks := onTicks(200*time.Millisecond, func(context.Context) {
		s, err := readRSS(pp.proc.Cmd.Process.Pid)
		if err == nil && s.rss > peak.rss {
			s.at = time.Since(start)
			peak = s
		}
	})
	return func() rssSample { stopTicks(); return peak }
}

// readRSS reads a process's resident memory from /proc, in one read.
func readRSS(pid int) (rssSample, error) {
	kib, err := procStatusKiBs(pid, "VmRSS", "RssAnon")
	if err != nil {
		return rssSample{}, err
	}
	return rssSample{rss: kib[0], anon: kib[1]}, nil
}

// ipvsHolds checks that the namespace's IPVS table has a virtual server
// with n real servers for each cluster IP in vips (port 80).
func ipvsHolds(ctx context.Context, ns *testutil.NetNS, vips []netip.Addr, n int) error {
	c, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		return err
	}
	defer c.Close()
	table, err := c.Table(ctx)
	if err != nil {
		return err
	}
	dests := map[netip.Addr]int{}
	for _, vs := range table {
		if vs.Service.Port == 80 && vs.Service.Protocol == inet.TCP {
			dests[vs.Service.Addr] = len(vs.Destinations)
		}
	}
	for i, vip := range vips {
		if d, ok := dests[vip]; !ok || d != n {
			return fmt.Errorf("service %s (%s:80): in the IPVS table %v, %d real servers, want %d", benchServiceName(i), vip, ok, d, n)
		}
	}
	return nil
}

// ipvsHasDest reports whether vip:80 has a real server at addr with a
// weight.
func ipvsHasDest(ctx context.Context, ns *testutil.NetNS, vip, addr netip.Addr) (bool, error) {
	c, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		return false, err
	}
	defer c.Close()
	dests, err := c.Destinations(ctx, ipvs.Service{Protocol: inet.TCP, Addr: vip, Port: 80})
	if err != nil {
		return false, err
	}
	for _, d := range dests {
		if d.Addr == addr && d.Weight > 0 {
			return true, nil
		}
	}
	return false, nil
}

// nftablesHolds checks that kube-proxy's nftables service-ips map has an
// element for each cluster IP in vips.
func nftablesHolds(ns *testutil.NetNS, vips []netip.Addr) error {
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	set, err := c.GetSetByName(&nftables.Table{Name: "kube-proxy", Family: nftables.TableFamilyIPv4}, "service-ips")
	if err != nil {
		return fmt.Errorf("kube-proxy's service-ips map: %w", err)
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		return err
	}
	have := map[netip.Addr]bool{}
	for _, e := range elems {
		// The key is address . protocol . port, each in 4-byte registers.
		if len(e.Key) >= 4 {
			have[netip.AddrFrom4([4]byte(e.Key[:4]))] = true
		}
	}
	for i, vip := range vips {
		if !have[vip] {
			return fmt.Errorf("service %s (%s): not in kube-proxy's service-ips map (%d elements)", benchServiceName(i), vip, len(elems))
		}
	}
	return nil
}

// iptablesHolds checks that kube-proxy's iptables rules in ns's nat
// table match every address of vips, as iptables-save prints them.
func iptablesHolds(ctx context.Context, ns *testutil.NetNS, vips []netip.Addr) error {
	out, err := ns.Output(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for f := range strings.FieldsSeq(out) {
		if addr, ok := strings.CutSuffix(f, "/32"); ok {
			have[addr] = true
		}
	}
	for i, vip := range vips {
		if !have[vip.String()] {
			return fmt.Errorf("service %s (%s): no rule for it in iptables-save -t nat", benchServiceName(i), vip)
		}
	}
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
