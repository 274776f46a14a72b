package main

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/problems"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/daemon/watcher/clientset"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// The daemon with the Kubernetes source, on client-go's fake clientset:
// the first sync programs the whole state once Services and
// EndpointSlices are listed, an EndpointSlice update is programmed as a
// change, and the daemon stops when its context ends.
func TestRunKubernetesSource(t *testing.T) {
	client := fake.NewClientset(append(webObjects(t), nodeWithIP("node-a", "192.168.0.1"))...)
	sink := &fakeEventSink{}
	var cfg *dataplane.Config
	// Debug, for the log line of each incremental sync.
	r := startRun(t, client, func(a *app, n *dataplanetest.Node) {
		a.build.Version = "v9.8.7"
		a.eventSink = func(*options) (events.Sink, error) { return sink, nil }
		a.newKernel = func(c *dataplane.Config) (kernel, error) {
			cfg = c
			return n.Open(c)
		}
	}, "--log-level=debug")
	r.await("the web Service", webVIP, webEndpoint)
	// A prefill, which the node does not tell from a sync, may have
	// programmed it: the update is to come after the first sync.
	r.awaitLog("the first sync", fullSyncLine)
	if cfg.ResyncInterval != 30*time.Second {
		t.Errorf("the dataplane rereads the kernel every %v, want the sync period", cfg.ResyncInterval)
	}
	if cfg.DrainTimeout != defaultDrainTimeout {
		t.Errorf("the dataplane's drain bound is %v, want --drain-timeout's default", cfg.DrainTimeout)
	}
	if cfg.Binding != dummy.BindAddresses {
		t.Errorf("the dataplane binds service IPs as %v, want addresses by default", cfg.Binding)
	}

	ctx := context.Background()
	slice, err := client.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.10"}, NodeName: new("node-b")})
	if _, err := client.DiscoveryV1().EndpointSlices("demo").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.await("the update", webVIP, webEndpoint, "10.244.2.10:8080")
	if err := r.stop(); err != nil {
		t.Errorf("the daemon's exit: %v", err)
	}
	log := r.stderr.String()
	// The first sync took the whole state, the update's the change alone.
	if first := syncedLine.FindStringSubmatch(log); first == nil || first[1] != "true" || !updateLine.MatchString(log) {
		t.Errorf("want a full first sync, then the update's incremental one:\n%s", log)
	}
	// The start-up line names the version.
	if !regexp.MustCompile(`starting.*"version": "v9.8.7"`).MatchString(log) {
		t.Errorf("no start-up line with the version:\n%s", log)
	}
	// kube-proxy's birth cry, on the Node.
	if got := sink.reasons(); len(got) != 1 || got[0] != "Starting" || sink.events[0].Regarding.Name != "node-a" {
		t.Errorf("events %v, want Starting on node-a", got)
	}
}

// The daemon's log lines of a sync, full or not (syncedLine), full
// (fullSyncLine), and incremental, of one changed service port
// (updateLine). Prefills, while the listing goes on, log other lines.
var (
	syncedLine   = regexp.MustCompile(`\tsynced\t\{"full": (true|false)`)
	fullSyncLine = regexp.MustCompile(`\tsynced\t\{"full": true`)
	updateLine   = regexp.MustCompile(`\tDEBUG\tsynced\t\{"full": false, "operations": [1-9][0-9]*, "changed": 1,`)
)

// webObjects are the objects of webManifest.
func webObjects(t *testing.T) []runtime.Object {
	t.Helper()
	objs, errs := watcher.ParseManifests("web.yaml", []byte(webManifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var out []runtime.Object
	for _, o := range objs {
		out = append(out, o.Object)
	}
	return out
}

// A start that fails changes nothing on the node: the configuration, the
// kubeconfig, IPVS, the scheduler and the listeners are all checked
// before the conntrack settings are written (and before the kernel is
// programmed).
func TestFailedStartChangesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	noIPVS := fmt.Errorf("dataplane: %w", ipvs.ErrNotSupported)
	files := []string{"--source=files", "--manifests", "testdata/demo", "--state-file=", "--metrics-bind-address="}
	tests := []struct {
		name        string
		args        []string
		newErr      error
		noScheduler bool
		want        string
	}{
		{"no IPVS", append([]string{"run", "--healthz-bind-address="}, files...), noIPVS, false, "no IPVS"},
		{"no IPVS, --init-only", append([]string{"run", "--init-only"}, files...), noIPVS, false, "no IPVS"},
		{"no scheduler", append([]string{"run", "--ipvs-scheduler=sh", "--healthz-bind-address="}, files...), nil, true, "ip_vs_sh"},
		{"no scheduler, --init-only", append([]string{"run", "--init-only", "--ipvs-scheduler=sh"}, files...), nil, true, "ip_vs_sh"},
		{"bad kubeconfig", []string{"run", "--kubeconfig=/nonexistent/kubeconfig", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}, nil, false, "/nonexistent/kubeconfig"},
		{"healthz address taken", append([]string{"run", "--healthz-bind-address=" + busy.Addr().String()}, files...), nil, false, "address already in use"},
		{"bad configuration", append([]string{"run", "--detect-local-mode=Bogus", "--healthz-bind-address="}, files...), nil, false, "DetectLocalMode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			a, stdout, stderr := testApp(n, tt.newErr)
			if tt.noScheduler {
				withoutScheduler(a, n, "sh")
			}
			wrote := false
			a.setConntrack = func(*kubeproxy.KubeProxyConntrackConfiguration) ([]string, error, error) {
				wrote = true
				return nil, nil, nil
			}
			code := execute(a, tt.args)
			out := stdout.String() + stderr.String()
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want 1 with %q:\n%s", code, tt.want, out)
			}
			if wrote {
				t.Error("the failed start wrote conntrack settings")
			}
			untouched(t, n, "the failed start")
		})
	}
}

// nodeWithIP is a Node with one InternalIP.
func nodeWithIP(name, ip string) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}
	return n
}

// As kube-proxy, a start from the API server programs nothing before its
// Node has IPs, waiting for it a bounded time: the Node's primary IPs
// choose the node-port addresses with nodePortAddresses: [primary], its
// zone the topology hints.
func TestRunWaitsForTheNode(t *testing.T) {
	waitFor := func(d time.Duration) func(*app, *dataplanetest.Node) {
		return func(a *app, _ *dataplanetest.Node) { a.nodeIPsWait = d }
	}
	client := fake.NewClientset(webObjects(t)...)
	r := startRun(t, client, waitFor(time.Hour))
	r.noSyncFor(2 * time.Second)
	if _, err := client.CoreV1().Nodes().Create(context.Background(), nodeWithIP("node-a", "192.168.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.await("the web Service after the Node's arrival", webVIP, webEndpoint)
	r.stop()

	// Without a Node at all, the first sync comes once the wait is over.
	r = startRun(t, fake.NewClientset(webObjects(t)...), waitFor(100*time.Millisecond))
	r.await("the web Service", webVIP, webEndpoint)
	r.stop()
	if !strings.Contains(r.stderr.String(), "timed out waiting for the Node") {
		t.Errorf("the timeout was not logged:\n%s", r.stderr)
	}
}

// runningDaemon is `ipvsplane run` in the background, programming a fake
// node.
type runningDaemon struct {
	t    *testing.T
	node *dataplanetest.Node
	// stderr is the daemon's log, which may be read while it runs.
	stderr *testutil.LockedBuffer
	cancel func()
	// exited is closed when the daemon has returned err.
	exited chan struct{}
	err    error
}

// runArgs are the tests' daemon's: node-a, syncing at once on a change,
// serving on ephemeral ports, without a state file.
var runArgs = []string{"run", "--hostname-override=node-a", "--ipvs-min-sync-period=0s",
	"--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="}

// startRun starts run with runArgs and extra on client and a fresh node;
// tune, if not nil, changes the app first.
func startRun(t *testing.T, client *fake.Clientset, tune func(*app, *dataplanetest.Node), extra ...string) *runningDaemon {
	t.Helper()
	n := newNode(t)
	a, _, _ := testApp(n, nil)
	a.kubeClient = func(*options) (*watcher.Client, error) { return clientset.New(client), nil }
	if tune != nil {
		tune(a, n)
	}
	return startApp(t, a, n, slices.Concat(runArgs, extra)...)
}

// startApp runs a's command line args in the background, a's kernel
// being node n's; it is stopped at the test's end, if not before.
func startApp(t *testing.T, a *app, n *dataplanetest.Node, args ...string) *runningDaemon {
	t.Helper()
	r := &runningDaemon{t: t, node: n, stderr: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	a.stderr = r.stderr
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	root := a.rootCommand()
	root.SetArgs(args)
	go func() {
		defer close(r.exited)
		r.err = root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// await waits until the node's virtual server vip has the real servers
// endpoints and no others; what names it in the failure.
func (r *runningDaemon) await(what, vip string, endpoints ...string) {
	r.t.Helper()
	slices.Sort(endpoints)
	r.until(what, func() bool {
		got, _ := realServers(r.node, vip)
		return slices.Equal(got, endpoints)
	})
}

// awaitLog waits until the daemon's log has a line that line matches.
func (r *runningDaemon) awaitLog(what string, line *regexp.Regexp) {
	r.t.Helper()
	r.until(what, func() bool { return line.MatchString(r.stderr.String()) })
}

// until polls cond, a minute at most, failing the test with what and
// the node's IPVS if it never holds.
func (r *runningDaemon) until(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); r.poll() {
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s within a minute; the node's IPVS:\n%s\nlog:\n%s", what, r.node.IPVS.Dump(), r.stderr)
		}
	}
}

// noSyncFor fails the test if within d the node gets the web Service's
// virtual server, or any set.
func (r *runningDaemon) noSyncFor(d time.Duration) {
	r.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); r.poll() {
		if _, ok := realServers(r.node, webVIP); ok || len(r.node.Sets.Names()) > 0 {
			r.t.Fatalf("programmed before the Node was read:\n%s", nodeState(r.t, r.node))
		}
	}
}

// poll waits a little before a check of the node is repeated, failing
// the test if the daemon stops meanwhile.
func (r *runningDaemon) poll() {
	r.t.Helper()
	select {
	case <-r.exited:
		r.t.Fatalf("the daemon stopped: %v\n%s", r.err, r.stderr)
	case <-time.After(10 * time.Millisecond):
	}
}

// stop stops the daemon and returns its error.
func (r *runningDaemon) stop() error {
	r.cancel()
	<-r.exited
	return r.err
}

// An EndpointSlice with one bad endpoint, from the API server, keeps its
// other endpoints and gets a Warning naming the field.
func TestRunKubernetesSourceBadEntry(t *testing.T) {
	initial := []runtime.Object{nodeWithIP("node-a", "192.168.0.1")}
	for _, o := range webObjects(t) {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1"}})
		}
		initial = append(initial, o)
	}
	sink := &fakeEventSink{}
	r := startRun(t, fake.NewClientset(initial...), func(a *app, _ *dataplanetest.Node) {
		a.eventSink = func(*options) (events.Sink, error) { return sink, nil }
	})
	r.await("the web Service with its good endpoint", webVIP, webEndpoint)
	r.stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, e := range sink.events {
		if e.Reason == problems.ReasonInvalidEntry && e.Regarding.Kind == "EndpointSlice" && strings.Contains(e.Note, "endpoints[1].addresses[0]") {
			return
		}
	}
	t.Errorf("no %s Event on the EndpointSlice naming endpoints[1].addresses[0]: %v", problems.ReasonInvalidEntry, sink.events)
}

// The tracker's one hook: a change kube-proxy queues sets the last-queued
// time of the families it concerns; every change, one it does not queue
// too (an input listed), sets the pending changes and asks for a sync.
func TestTrackerHook(t *testing.T) {
	clock := time.Unix(1000, 0)
	clockCalls := 0
	a := &app{now: func() time.Time { clockCalls++; return clock }}
	m := metrics.New().ForFamilies([]inet.Family{inet.IPv4, inet.IPv6})
	healthz, livez := m.AnswerCounters()
	p := &daemonParts{metrics: m, health: healthcheck.NewProxyHealth(time.Minute, a.now, false, nil, healthz, livez)}
	requests := 0
	p.tracker = a.newTracker(p, &config.Settings{Node: model.Node{Name: "node-a"}}, false, func() { requests++ })
	gauges := func() map[string]float64 {
		t.Helper()
		got := map[string]float64{}
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, s := range f.GetMetric() {
				name := f.GetName()
				for _, l := range s.GetLabel() {
					name += " " + l.GetValue()
				}
				if s.GetGauge() != nil {
					got[name] = s.GetGauge().GetValue()
				}
			}
		}
		return got
	}
	const lastQueued = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"

	p.tracker.MarkSynced(watcher.Services)
	g := gauges()
	if _, ok := g[lastQueued+" IPv4"]; ok || requests != 1 || clockCalls != 1 {
		// The one clock reading is the health's (ProxyHealth.Queued).
		t.Errorf("an input listed: last queued %v, %d requests, %d clock readings; want none, 1, 1", g[lastQueued+" IPv4"], requests, clockCalls)
	}

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
	}}
	clock = clock.Add(time.Second)
	if err := p.tracker.SetService(svc); err != nil {
		t.Fatal(err)
	}
	g = gauges()
	if g[lastQueued+" IPv4"] != 1001 || g[lastQueued+" IPv6"] != 1001 || g["kubeproxy_sync_proxy_rules_service_changes_pending"] != 1 || requests != 2 {
		t.Errorf("a Service: last queued %v and %v, %v service changes pending, %d requests; want 1001 for both families, 1, 2",
			g[lastQueued+" IPv4"], g[lastQueued+" IPv6"], g["kubeproxy_sync_proxy_rules_service_changes_pending"], requests)
	}
}
