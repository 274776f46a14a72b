//go:build vmtest

package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// echoPort is where the backends of the fault tests echo lines back.
const echoPort = 9090

// echoServices writes n ClusterIP services, 10.96.1.1 to 10.96.1.n port
// 80, each with the three backends' echo servers as endpoints.
func echoServices(t testing.TB, dir string, n int) []string {
	t.Helper()
	var addrs []string
	for i := 1; i <= n; i++ {
		ip := fmt.Sprintf("10.96.1.%d", i)
		addrs = append(addrs, ip+":80")
		writeFile(t, filepath.Join(dir, fmt.Sprintf("echo-%d.yaml", i)), fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: echo-%[1]d, namespace: faults}
spec:
  clusterIP: %[2]s
  clusterIPs: [%[2]s]
  ports: [{name: echo, port: 80, targetPort: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-%[1]d-x
  namespace: faults
  labels: {kubernetes.io/service-name: echo-%[1]d}
addressType: IPv4
ports: [{name: echo, port: %[3]d, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], nodeName: node-a, conditions: {ready: true}}
- {addresses: [10.244.2.2], nodeName: node-b, conditions: {ready: true}}
- {addresses: [10.244.3.2], nodeName: node-b, conditions: {ready: true}}
`, i, ip, echoPort))
	}
	return addrs
}

// echoLoad keeps long-lived connections busy, a line echoed every few
// milliseconds on each, and opens new connections meanwhile, counting
// whatever fails: a connection refused or reset, or one that stays
// silent for brokenAfter. One that answers late is slow, not broken: on
// a machine running other guests, an emulated guest may not run for
// seconds.
type echoLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	broken  []string // long-lived connections that failed, and why
	long    int
	newOK   atomic.Int64
	newFail atomic.Int64
	newErrs []string
	echoes  atomic.Int64
	// slow counts the echoes and connections that took over slowEcho;
	// slowest is the longest of all, in nanoseconds.
	slow, slowest atomic.Int64
}

// startTraffic opens perService long-lived connections to each address
// from the client and starts the churn of new ones.
func startTraffic(t testing.TB, client *testutil.NetNS, addrs []string, perService int) *echoLoad {
	t.Helper()
	tr := &echoLoad{stop: make(chan struct{})}
	for _, addr := range addrs {
		for range perService {
			c, err := client.DialEcho(addr, 3*time.Second)
			if err != nil {
				t.Fatalf("dialling %s: %v", addr, err)
			}
			tr.long++
			tr.wg.Add(1)
			go tr.keepBusy(c, addr)
		}
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-tr.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			addr := addrs[i%len(addrs)]
			start := time.Now()
			c, err := client.DialEcho(addr, brokenAfter)
			if err == nil {
				err = c.Echo(fmt.Sprintf("new %d", i), brokenAfter)
				c.Close()
			}
			tr.took(time.Since(start))
			if err != nil {
				tr.newFail.Add(1)
				tr.mu.Lock()
				tr.newErrs = append(tr.newErrs, fmt.Sprintf("%s: %v", addr, err))
				tr.mu.Unlock()
			} else {
				tr.newOK.Add(1)
			}
		}
	}()
	return tr
}

// brokenAfter is how long a connection may stay silent before it counts
// as broken; slowEcho, how long an echo takes before it counts as slow.
const (
	brokenAfter = time.Minute
	slowEcho    = 5 * time.Second
)

// took counts an echo or connection that took d.
func (tr *echoLoad) took(d time.Duration) {
	if d > slowEcho {
		tr.slow.Add(1)
	}
	for {
		old := tr.slowest.Load()
		if int64(d) <= old || tr.slowest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// slowness says how many echoes and connections were slow.
func (tr *echoLoad) slowness() string {
	return fmt.Sprintf("%d took over %v, the slowest %v", tr.slow.Load(), slowEcho, time.Duration(tr.slowest.Load()).Round(time.Millisecond))
}

func (tr *echoLoad) keepBusy(c *testutil.EchoConn, addr string) {
	defer tr.wg.Done()
	defer c.Close()
	for i := 0; ; i++ {
		select {
		case <-tr.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		start := time.Now()
		err := c.Echo(fmt.Sprintf("%s line %d", c.LocalAddr(), i), brokenAfter)
		tr.took(time.Since(start))
		if err != nil {
			tr.mu.Lock()
			tr.broken = append(tr.broken, fmt.Sprintf("%s -> %s after %d lines: %v", c.LocalAddr(), addr, i, err))
			tr.mu.Unlock()
			return
		}
		tr.echoes.Add(1)
	}
}

// end stops the traffic and returns the broken long-lived connections
// and the failed new ones.
func (tr *echoLoad) end() (broken, newErrs []string) {
	close(tr.stop)
	tr.wg.Wait()
	return tr.broken, tr.newErrs
}

// realCounters is one real server's line of ipvsadm: weight, and the
// counters that must only grow.
type realCounters struct {
	weight                                    int
	conns, inPkts, outPkts, inBytes, outBytes uint64
}

var virtualLine = regexp.MustCompile(`^(TCP|UDP|SCTP)\s+(\S+)`)

// readReals reads every real server's weight (ipvsadm -Ln) and counters
// (ipvsadm -Ln --stats --exact), keyed "TCP 10.96.1.1:80 -> 10.244.1.2:9090".
func readReals(t testing.TB, ns *testutil.NetNS) map[string]realCounters {
	t.Helper()
	out := map[string]realCounters{}
	each := func(args []string, fn func(key string, f []string)) {
		virtual := ""
		for _, line := range strings.Split(ns.Run(t, "ipvsadm", args...), "\n") {
			if m := virtualLine.FindStringSubmatch(line); m != nil {
				virtual = m[1] + " " + m[2]
				continue
			}
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "->" && virtual != "" && f[1] != "RemoteAddress:Port" {
				fn(virtual+" -> "+f[1], f)
			}
		}
	}
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ipvsadm printed %q for a number", s)
		}
		return n
	}
	each([]string{"-Ln"}, func(key string, f []string) {
		// -> ADDR Forward Weight ActiveConn InActConn
		rc := out[key]
		rc.weight = int(num(f[3]))
		out[key] = rc
	})
	each([]string{"-Ln", "--stats", "--exact"}, func(key string, f []string) {
		// -> ADDR Conns InPkts OutPkts InBytes OutBytes
		rc := out[key]
		rc.conns, rc.inPkts, rc.outPkts, rc.inBytes, rc.outBytes = num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6])
		out[key] = rc
	})
	return out
}

// compareReals checks that every real server of before is still there
// with its weight, and that no counter went down.
func compareReals(t testing.TB, what string, before, after map[string]realCounters) {
	t.Helper()
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range before {
			if !yield(k) {
				return
			}
		}
	}) {
		b := before[key]
		a, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s: real server %s is gone", what, key)
		case a.weight != b.weight:
			t.Errorf("%s: %s weight %d, was %d", what, key, a.weight, b.weight)
		case a.conns < b.conns || a.inPkts < b.inPkts || a.outPkts < b.outPkts || a.inBytes < b.inBytes || a.outBytes < b.outBytes:
			t.Errorf("%s: %s counters went down: %+v, were %+v", what, key, a, b)
		}
	}
}

// metricValue returns the value of one metric line of /metrics, or 0 if
// it is absent.
func metricValue(body, name string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// metrics fetches the daemon's /metrics.
func fetchMetrics(t testing.TB, ns *testutil.NetNS) string {
	t.Helper()
	// A few tries: under emulation a busy guest now and then lets a
	// loopback connection time out.
	var err error
	for range 3 {
		var code int
		var body string
		if code, body, err = httpGet(ns, "127.0.0.1:10249", "/metrics"); err == nil && code == 200 {
			return body
		}
		t.Logf("/metrics: %d %v", code, err)
	}
	t.Fatalf("/metrics: %v", err)
	return ""
}

// kernelState prints what ipvsplane owns in the node's kernel, in an order
// that does not depend on the order of programming.
func kernelState(t testing.TB, ns *testutil.NetNS) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range [][]string{
		{"ipvsadm", "-Sn"},
		{"ipset", "save"},
		{"ip", "-o", "addr", "show", "dev", "kube-ipvs0"},
		{"nft", "list", "ruleset"},
	} {
		out, err := ns.Output(t.Context(), cmd[0], cmd[1:]...)
		if err != nil {
			out = "error: " + err.Error()
		}
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			l = initval.ReplaceAllString(l, "")
			// ip prints the device's index first.
			if cmd[0] == "ip" {
				if _, rest, ok := strings.Cut(l, ":"); ok {
					l = strings.Join(strings.Fields(rest), " ")
				}
			}
			lines[i] = l
		}
		if cmd[0] != "nft" {
			slices.Sort(lines)
		}
		fmt.Fprintf(&b, "# %s\n%s\n", strings.Join(cmd, " "), strings.Join(lines, "\n"))
	}
	return b.String()
}

// A hash set's seed is random.
var initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

// waitFor polls cond every 50ms until it holds or timeout passes, and
// returns how long that took.
func waitFor(timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
