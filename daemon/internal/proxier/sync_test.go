package proxier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeKernel records the calls a daemon makes. If synced is not nil, each
// sync sends its service ports on it.
type fakeKernel struct {
	calls   []string
	changes []model.Change
	state   *model.State
	fail    error
	synced  chan []model.ServicePort
	// block, if not nil, holds Sync until it is closed.
	block chan struct{}
	// noScheduler fails CheckScheduler.
	noScheduler bool
	// problems are reported by every sync.
	problems []error
	// rulesFail makes every sync fail to write the rules.
	rulesFail bool
	// sweeping makes every sync one that compared a piece of a reread.
	sweeping bool
	// planPanics makes the next SyncChanges fail as a dataplane whose
	// planner panicked on the changes does.
	planPanics bool
	// needsState makes every sync ask for the whole state next.
	needsState bool
	// claims are the fake planner's owners: each virtual server is the
	// port's that claimed it last.
	claims map[plan.VirtualKey]model.ServicePortName
}

func (k *fakeKernel) Owner(vk plan.VirtualKey) (model.ServicePortName, bool) {
	name, ok := k.claims[vk]
	return name, ok
}

// claim follows the ports' changes in claims, from scratch when whole.
func (k *fakeKernel) claim(node *model.Node, changes []model.Change, whole bool) {
	if whole || k.claims == nil {
		k.claims = map[plan.VirtualKey]model.ServicePortName{}
	}
	for _, c := range changes {
		maps.DeleteFunc(k.claims, func(_ plan.VirtualKey, n model.ServicePortName) bool { return n == c.Name })
		if c.Port != nil {
			for _, vk := range plan.VirtualKeys(node, c.Port) {
				k.claims[vk] = c.Name
			}
		}
	}
}

func (k *fakeKernel) InitNode(context.Context, *model.Node) error {
	k.calls = append(k.calls, "init")
	return nil
}

func (k *fakeKernel) ReadAhead(context.Context) error { return nil }

func (k *fakeKernel) CheckScheduler(_ context.Context, name string) error {
	if k.noScheduler {
		return fmt.Errorf("dataplane: IPVS scheduler %q: %w: its kernel module ip_vs_%s is missing", name, dataplane.ErrSchedulerNotSupported, name)
	}
	return nil
}

func (k *fakeKernel) result(full bool) (*dataplane.Result, error) {
	res := &dataplane.Result{Plan: &plan.Plan{}, Full: full, Sweeping: k.sweeping, NeedsState: k.needsState, Errors: slices.Clone(k.problems)}
	if k.fail != nil {
		res.Errors = append(res.Errors, &dataplane.OpError{Op: plan.Bind{}, Err: k.fail})
	}
	if k.rulesFail {
		res.Errors = append(res.Errors, &dataplane.OpError{Op: plan.ReplaceRules{}, Err: errors.New("no xt_set")})
		res.RulesFailed = true
	}
	return res, nil
}

func (k *fakeKernel) Sync(_ context.Context, s *model.State) (*dataplane.Result, error) {
	k.calls = append(k.calls, "sync")
	k.state = s
	changes := make([]model.Change, len(s.Services))
	for i := range s.Services {
		changes[i] = model.Change{Name: s.Services[i].Name, Port: &s.Services[i]}
	}
	k.claim(&s.Node, changes, true)
	if k.block != nil {
		<-k.block
	}
	if k.synced != nil {
		k.synced <- s.Services
	}
	return k.result(!slices.Contains(k.calls[:len(k.calls)-1], "sync"))
}

func (k *fakeKernel) Prefill(_ context.Context, s *model.State) (*dataplane.Result, error) {
	k.calls = append(k.calls, "prefill")
	k.state = s
	return &dataplane.Result{Plan: plan.New(plan.Bind{Addr: netip.MustParseAddr("10.96.0.80")})}, nil
}

func (k *fakeKernel) PrefillChanges(_ context.Context, c []model.Change) (*dataplane.Result, error) {
	k.calls = append(k.calls, "prefill changes")
	k.changes = c
	return &dataplane.Result{Plan: &plan.Plan{}}, nil
}

func (k *fakeKernel) SyncChanges(_ context.Context, c []model.Change) (*dataplane.Result, error) {
	k.calls = append(k.calls, "changes")
	k.changes = c
	if k.planPanics {
		k.planPanics = false
		pe := &dataplane.PlanPanicError{Value: "nil pointer dereference", Stack: []byte("goroutine 1")}
		for _, ch := range c {
			pe.Services = append(pe.Services, ch.Name)
		}
		return nil, pe
	}
	if k.state != nil {
		k.claim(&k.state.Node, c, false)
	}
	if k.synced != nil {
		var ports []model.ServicePort
		for _, ch := range c {
			if ch.Port != nil {
				ports = append(ports, *ch.Port)
			}
		}
		k.synced <- ports
	}
	return k.result(false)
}

func (k *fakeKernel) DryRun(context.Context, *model.State) (*plan.Plan, []error, error) {
	k.calls = append(k.calls, "dry-run")
	// A first sync's plan against a kernel that holds the desired state:
	// the reconciliation kube-proxy's first sync runs too.
	return plan.New(plan.ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP}), nil, nil
}

func (k *fakeKernel) Handover(context.Context) error {
	k.calls = append(k.calls, "handover")
	return nil
}

func (k *fakeKernel) Cleanup(context.Context) error {
	k.calls = append(k.calls, "cleanup")
	return nil
}

func (k *fakeKernel) Close() error { return nil }

const webManifest = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  clusterIP: 10.96.0.80
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [10.244.1.10], nodeName: node-a}
`

func feed(t *testing.T, tr *watcher.Tracker, manifest string) {
	t.Helper()
	objs, errs := watcher.ParseManifests("test.yaml", []byte(manifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, o := range objs {
		if err := tr.SetObject(o.Object, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// testServiceServers returns health-check node port servers of node that
// report the daemon healthy; a nil listen listens on the address asked.
func testServiceServers(node string, listen func(netip.AddrPort) (net.Listener, error)) *healthcheck.ServiceServers {
	return healthcheck.NewServiceServers(healthcheck.ServiceConfig{Log: zap.NewNop(), Node: node, Healthy: func() bool { return true }, Listen: listen})
}

// statusCode serves one request and returns the answer's status code.
func statusCode(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code
}

func TestDaemonSync(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	k := &fakeKernel{}
	stateFile := filepath.Join(t.TempDir(), "status.json")
	m := metrics.New()
	d := &Proxier{
		log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, clock.now, m),
		records: status.NewWriter(stateFile, func(err error) { t.Error(err) }), now: clock.now,
		tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}}),
	}
	var listened []netip.AddrPort
	d.hc = testServiceServers("node-a", func(a netip.AddrPort) (net.Listener, error) {
		listened = append(listened, a)
		return net.Listen("tcp", "127.0.0.1:0")
	})
	defer d.hc.Close(context.Background())
	feed(t, d.tracker, webManifest)
	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)

	// Each sync's record is written, as the writer's goroutine would.
	sync := func() {
		t.Helper()
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.records.Flush()
	}
	sync()
	if len(k.state.Services) != 1 {
		t.Fatalf("first sync: %d service ports", len(k.state.Services))
	}
	if got := d.hc.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("health-check ports: %v", got)
	}
	if want := []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:32000")}; !slices.Equal(listened, want) {
		t.Errorf("health-check port listened on %v, want %v", listened, want)
	}
	rec, err := status.ReadRecord(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := map[string]string{"tcp/10.96.0.80:80": "demo/web:http", "tcp/*:30080": "demo/web:http"}
	if diff := cmp.Diff(wantNames, rec.Services); diff != "" || rec.Node != "" || rec.Syncs != 1 || !rec.Full {
		t.Errorf("state file: %+v %s", rec, diff)
	}

	// An endpoint change goes through the incremental path, with its
	// trigger time observed; it leaves the names file alone.
	clock.advance(time.Second)
	if err := os.Remove(status.NamesFile(stateFile)); err != nil {
		t.Fatal(err)
	}
	feed(t, d.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	sync()
	if _, err := os.Stat(status.NamesFile(stateFile)); !os.IsNotExist(err) {
		t.Errorf("an endpoint change rewrote the names file: %v", err)
	}
	if len(k.changes) != 1 || k.changes[0].Name.Name != "web" || k.changes[0].Port == nil {
		t.Errorf("changes: %+v", k.changes)
	}
	// An IPv4 slice's change is the IPv4 proxier's, as in kube-proxy.
	if got := seriesFamilies(t, d.metrics, "kubeproxy_network_programming_duration_seconds"); !slices.Equal(got, []string{"IPv4"}) {
		t.Errorf("network programming latency: series of %v, want IPv4's alone", got)
	}
	// A removed service is a change without a port. The names file is
	// written at most once per namesEvery.
	clock.advance(namesEvery)
	d.tracker.DeleteService("demo", "web")
	sync()
	if len(k.changes) != 1 || k.changes[0].Port != nil {
		t.Errorf("removal: %+v", k.changes)
	}
	if len(d.hc.Ports()) != 0 {
		t.Errorf("health-check ports left: %v", d.hc.Ports())
	}
	if rec, err := status.ReadRecord(stateFile); err != nil || len(rec.Services) != 0 {
		t.Errorf("names after the removal: %v %v", rec.Services, err)
	}
	// Back within namesEvery: the names file waits, and the first sync
	// after namesEvery writes it, with nothing else changed.
	feed(t, d.tracker, webManifest)
	sync()
	if rec, err := status.ReadRecord(stateFile); err != nil || len(rec.Services) != 0 {
		t.Errorf("names rewritten within namesEvery: %v %v", rec.Services, err)
	}
	clock.advance(namesEvery)
	sync()
	if rec, err := status.ReadRecord(stateFile); err != nil || cmp.Diff(wantNames, rec.Services) != "" {
		t.Errorf("names after namesEvery: %v %v", rec.Services, err)
	}
	d.tracker.DeleteService("demo", "web")
	sync()
	// A change of the node's settings hands over the whole state.
	feed(t, d.tracker, "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.9}]}\n")
	sync()
	if got := k.state.Node.NodeIPs; len(got) != 1 || got[0].String() != "192.168.0.9" {
		t.Errorf("node addresses: %v", got)
	}
	// The first sync, an endpoint change, the removal, the names file's
	// three, and the node's change.
	want := []string{"sync", "changes", "changes", "changes", "changes", "changes", "sync"}
	if diff := cmp.Diff(want, k.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// Failed operations make the runner try again.
	k.fail = errors.New("boom")
	if err := d.sync(context.Background()); err == nil {
		t.Error("a sync with failed operations reported no error")
	}
	if got := gatheredValue(t, d.metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != float64(clock.t.Unix()) {
		t.Errorf("last sync timestamp %v, want %v", got, clock.t.Unix())
	}
}

// A sync whose sets or rules fail is not an update for health, as in
// kube-proxy: the change it took still waits, and after twice the sync
// period /healthz and /livez answer 503, until a sync programs the node.
func TestDaemonHealthFollowsRules(t *testing.T) {
	const period = 30 * time.Second
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	k := &fakeKernel{rulesFail: true}
	m := metrics.New()
	d := &Proxier{
		log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(period, clock.now, m), now: clock.now,
		tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}}),
	}
	d.hc = testServiceServers("node-a", func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	defer d.hc.Close(context.Background())
	d.health.Updated()
	feed(t, d.tracker, webManifest)
	d.health.Queued()
	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)
	healthy := func() bool {
		t.Helper()
		code := statusCode(d.health.HealthzHandler(), "/healthz")
		live := statusCode(d.health.LivezHandler(), "/livez")
		if (code == http.StatusOK) != (live == http.StatusOK) {
			t.Errorf("/healthz %d, /livez %d", code, live)
		}
		return code == http.StatusOK
	}

	for range 3 {
		if err := d.sync(context.Background()); err == nil {
			t.Error("a sync whose rules failed reported no error")
		}
		clock.advance(period)
	}
	if healthy() {
		t.Error("healthy after two sync periods of failing rules")
	}
	// As kube-proxy, a sync whose rules failed sets no last sync time.
	if got := gatheredValue(t, m, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != 0 {
		t.Errorf("last sync time %v after syncs whose rules failed", got)
	}
	k.rulesFail = false
	if err := d.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !healthy() {
		t.Error("not healthy after the sync that programmed the node")
	}
	if got := gatheredValue(t, m, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != float64(clock.t.Unix()) {
		t.Errorf("last sync time %v, want %v", got, clock.t.Unix())
	}
}

// A sync that compared a piece of a reread of the kernel asks for the
// next sync at once: the rest of the compare does not wait for changes.
func TestDaemonRequestsSyncWhileSweeping(t *testing.T) {
	k := &fakeKernel{}
	m := metrics.New()
	requests := 0
	d := &Proxier{
		log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m), now: time.Now,
		tracker:     watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}}),
		requestSync: func() { requests++ },
	}
	d.hc = testServiceServers("node-a", func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	defer d.hc.Close(context.Background())
	feed(t, d.tracker, webManifest)
	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)
	for _, sweeping := range []bool{false, true, true, false} {
		k.sweeping = sweeping
		before := requests
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if asked := requests > before; asked != sweeping {
			t.Errorf("a sync with Sweeping %v asked for another: %v", sweeping, asked)
		}
	}
}

// A sync whose dataplane asks for the whole state (it learned, reading
// the kernel, what changes ports it was not given) asks for the next
// sync at once and hands it the whole state; the one after goes back to
// changes.
func TestDaemonHandsWholeStateWhenAsked(t *testing.T) {
	k := &fakeKernel{}
	m := metrics.New()
	requests := 0
	d := &Proxier{
		log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m), now: time.Now,
		tracker:     watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}}),
		requestSync: func() { requests++ },
	}
	d.hc = testServiceServers("node-a", func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	defer d.hc.Close(context.Background())
	feed(t, d.tracker, webManifest)
	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)
	for _, step := range []struct {
		needsState bool
		want       string
	}{{false, "sync"}, {true, "changes"}, {false, "sync"}, {false, "changes"}} {
		k.needsState, k.calls = step.needsState, nil
		before := requests
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(k.calls, step.want) {
			t.Errorf("calls %v, want %s", k.calls, step.want)
		}
		if asked := requests > before; asked != step.needsState {
			t.Errorf("a sync with NeedsState %v asked for another: %v", step.needsState, asked)
		}
	}
}

// A long sync logs progress lines while it runs, and none after. In a
// synctest bubble, whose clock moves only when every goroutine in it
// waits, the lines come exactly every progressEvery.
func TestDaemonProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		k := &fakeKernel{block: make(chan struct{})}
		m := metrics.New()
		d := &Proxier{
			log: zap.New(core), dataplane: k, metrics: m, health: testHealth(time.Minute, time.Now, m),
			now:     time.Now,
			tracker: watcher.NewTracker(watcher.TrackerConfig{}),
		}
		d.hc = testServiceServers("", nil)
		done := make(chan error, 1)
		go func() { done <- d.sync(context.Background()) }()
		time.Sleep(progressEvery*2 + progressEvery/2)
		synctest.Wait()
		if n := logs.FilterMessage("sync in progress").Len(); n != 2 {
			t.Errorf("%d progress lines in 2.5 periods of a sync, want 2", n)
		}
		close(k.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * progressEvery)
		synctest.Wait()
		if n := logs.FilterMessage("sync in progress").Len(); n != 2 {
			t.Errorf("%d progress lines after the sync ended, want the 2 before", n)
		}
		if logs.FilterMessage("synced").Len() != 1 {
			t.Errorf("logs: %v", logs.All())
		}
	})
}

// Before the first listing ends, the daemon says it is waiting, every
// progressEvery, and stops once it has.
func TestDaemonWaitListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		d := &Proxier{log: zap.New(core), now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{})}
		done := make(chan struct{})
		go func() {
			d.WaitListed(context.Background())
			close(done)
		}()
		const waiting = "waiting for Services and EndpointSlices to be listed and the Node read"
		time.Sleep(progressEvery + progressEvery/2)
		synctest.Wait()
		if n := logs.FilterMessage(waiting).Len(); n != 1 {
			t.Errorf("%d lines in 1.5 periods of waiting, want 1", n)
		}
		d.tracker.MarkSynced(watcher.Services)
		d.tracker.MarkSynced(watcher.EndpointSlices)
		time.Sleep(progressEvery)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still waiting after the listing")
		}
	})
}
