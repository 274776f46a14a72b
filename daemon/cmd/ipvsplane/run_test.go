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
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
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
	objs, errs := watcher.ParseManifests("web.yaml", []byte(webManifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	initial := []runtime.Object{nodeWithIP("node-a", "192.168.0.1")}
	for _, o := range objs {
		initial = append(initial, o.Object)
	}
	client := fake.NewClientset(initial...)
	k := &fakeKernel{synced: make(chan []model.ServicePort, 16)}
	a, _, stderr := testApp(k, nil)
	a.build.Version = "v9.8.7"
	a.kubeClient = func(*options) (*watcher.Client, error) { return clientset.New(client), nil }
	sink := &fakeEventSink{}
	a.eventSink = func(*options) (events.Sink, error) { return sink, nil }
	var cfg *dataplane.Config
	a.newKernel = func(c *dataplane.Config) (kernel, error) {
		cfg = c
		return k, nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := a.rootCommand()
	root.SetArgs([]string{"run", "--hostname-override=node-a", "--ipvs-min-sync-period=0s",
		"--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	next := func() []model.ServicePort {
		t.Helper()
		select {
		case ports := <-k.synced:
			return ports
		case err := <-done:
			t.Fatalf("the daemon stopped: %v\n%s", err, stderr)
		case <-time.After(30 * time.Second):
			t.Fatalf("no sync within 30s:\n%s", stderr)
		}
		return nil
	}
	ports := next()
	if cfg.ResyncInterval != 30*time.Second {
		t.Errorf("the dataplane rereads the kernel every %v, want the sync period", cfg.ResyncInterval)
	}
	if cfg.DrainTimeout != defaultDrainTimeout {
		t.Errorf("the dataplane's drain bound is %v, want --drain-timeout's default", cfg.DrainTimeout)
	}
	if cfg.Binding != dummy.BindAddresses {
		t.Errorf("the dataplane binds service IPs as %v, want addresses by default", cfg.Binding)
	}
	if len(ports) != 1 || len(ports[0].Endpoints) != 1 || ports[0].Endpoints[0].Addr.String() != "10.244.1.10" {
		t.Fatalf("first sync: %+v", ports)
	}

	slice, err := client.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.10"}, NodeName: new("node-b")})
	if _, err := client.DiscoveryV1().EndpointSlices("demo").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ports = next(); len(ports) == 0; ports = next() {
	}
	if len(ports[0].Endpoints) != 2 {
		t.Errorf("after the update: %+v", ports[0].Endpoints)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the daemon's exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	// Prefills may come first, while the listing goes on.
	if syncs := slices.DeleteFunc(slices.Clone(k.calls), func(c string) bool { return strings.HasPrefix(c, "prefill") }); syncs[0] != "sync" || syncs[len(syncs)-1] != "changes" {
		t.Errorf("calls: %v", k.calls)
	}
	// The start-up line names the version.
	if !regexp.MustCompile(`starting.*"version": "v9.8.7"`).MatchString(stderr.String()) {
		t.Errorf("no start-up line with the version:\n%s", stderr)
	}
	// kube-proxy's birth cry, on the Node.
	if got := sink.reasons(); len(got) != 1 || got[0] != "Starting" || sink.events[0].Regarding.Name != "node-a" {
		t.Errorf("events %v, want Starting on node-a", got)
	}
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
			k := &fakeKernel{noScheduler: tt.noScheduler}
			a, stdout, stderr := testApp(k, tt.newErr)
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
			if wrote || len(k.calls) > 0 {
				t.Errorf("the failed start wrote conntrack settings (%v) or called the kernel (%v)", wrote, k.calls)
			}
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
	objs, errs := watcher.ParseManifests("web.yaml", []byte(webManifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var initial []runtime.Object
	for _, o := range objs {
		initial = append(initial, o.Object)
	}
	client := fake.NewClientset(initial...)
	r := startRun(t, client, time.Hour)
	r.noSyncFor(2 * time.Second)
	if _, err := client.CoreV1().Nodes().Create(context.Background(), nodeWithIP("node-a", "192.168.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.synced("of the Node's arrival")
	r.stop()

	// Without a Node at all, the first sync comes once the wait is over.
	r = startRun(t, fake.NewClientset(initial...), 100*time.Millisecond)
	r.synced("")
	r.stop()
	if !strings.Contains(r.stderr.String(), "timed out waiting for the Node") {
		t.Errorf("the timeout was not logged:\n%s", r.stderr)
	}
}

// runningDaemon is `ipvsplane run` on a fake clientset and a fake
// kernel, in the background.
type runningDaemon struct {
	t      *testing.T
	k      *fakeKernel
	stderr fmt.Stringer
	done   chan error
	cancel func()
}

// startRun starts run on client, waiting at most nodeIPsWait for the Node.
func startRun(t *testing.T, client *fake.Clientset, nodeIPsWait time.Duration) *runningDaemon {
	t.Helper()
	k := &fakeKernel{synced: make(chan []model.ServicePort, 16)}
	a, _, stderr := testApp(k, nil)
	a.kubeClient = func(*options) (*watcher.Client, error) { return clientset.New(client), nil }
	a.nodeIPsWait = nodeIPsWait
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	root := a.rootCommand()
	root.SetArgs([]string{"run", "--hostname-override=node-a", "--ipvs-min-sync-period=0s",
		"--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="})
	r := &runningDaemon{t: t, k: k, stderr: stderr, done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- root.ExecuteContext(ctx) }()
	return r
}

// synced waits for a sync, within 30 s of what after says.
func (r *runningDaemon) synced(after string) {
	r.t.Helper()
	select {
	case <-r.k.synced:
	case err := <-r.done:
		r.t.Fatalf("the daemon stopped: %v\n%s", err, r.stderr)
	case <-time.After(30 * time.Second):
		r.t.Fatalf("no sync within 30s %s:\n%s", after, r.stderr)
	}
}

// noSyncFor fails the test if a sync comes within d.
func (r *runningDaemon) noSyncFor(d time.Duration) {
	r.t.Helper()
	select {
	case ports := <-r.k.synced:
		r.t.Fatalf("synced %d service ports before the Node was read", len(ports))
	case err := <-r.done:
		r.t.Fatalf("the daemon stopped: %v\n%s", err, r.stderr)
	case <-time.After(d):
	}
}

func (r *runningDaemon) stop() {
	r.cancel()
	<-r.done
}

// An EndpointSlice with one bad endpoint, from the API server, keeps its
// other endpoints and gets a Warning naming the field.
func TestRunKubernetesSourceBadEntry(t *testing.T) {
	objs, errs := watcher.ParseManifests("web.yaml", []byte(webManifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	initial := []runtime.Object{nodeWithIP("node-a", "192.168.0.1")}
	for _, o := range objs {
		if s, ok := o.Object.(*discoveryv1.EndpointSlice); ok {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1"}})
		}
		initial = append(initial, o.Object)
	}
	k := &fakeKernel{synced: make(chan []model.ServicePort, 16)}
	a, _, stderr := testApp(k, nil)
	a.kubeClient = func(*options) (*watcher.Client, error) { return clientset.New(fake.NewClientset(initial...)), nil }
	sink := &fakeEventSink{}
	a.eventSink = func(*options) (events.Sink, error) { return sink, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := a.rootCommand()
	root.SetArgs([]string{"run", "--hostname-override=node-a", "--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case ports := <-k.synced:
		if len(ports) != 1 || len(ports[0].Endpoints) != 1 {
			t.Errorf("first sync: %+v, want the service with its good endpoint", ports)
		}
	case err := <-done:
		t.Fatalf("the daemon stopped: %v\n%s", err, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("no sync within 30s:\n%s", stderr)
	}
	cancel()
	<-done
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
