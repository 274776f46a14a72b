package proxier

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/internal/healthcheck"
	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
	"github.com/ipvsplane/ipvsplane/ipset"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// spy is a real Dataplane on a fake node, which records the calls the
// proxier makes and what it hands over: whether a sync took the whole
// state or the changes is the proxier's choice, which what the node holds
// afterwards does not show. Its other fields inject what the fake node
// cannot be made to produce on demand, each on top of a real result.
type spy struct {
	*dataplane.Dataplane
	calls   []string
	state   *model.State
	changes []model.Change
	// sweeping and needsState set those flags of each sync's result. A
	// Dataplane sets them after a background reread of the kernel, whose
	// timing the fake node leaves to the Dataplane.
	sweeping, needsState bool
	// planPanics fails the next SyncChanges as a Dataplane whose planner
	// panicked does: a bug, which no input is known to trigger.
	planPanics bool
	// block, if not nil, holds Sync until it is closed: a sync long
	// enough to log its progress.
	block chan struct{}
	// extra are added to each sync's errors: what the fake IPVS accepts
	// and a kernel refuses, such as a subnet's broadcast address as an
	// endpoint.
	extra []error
}

func (s *spy) Sync(ctx context.Context, state *model.State) (*dataplane.Result, error) {
	s.calls, s.state = append(s.calls, "sync"), state
	if s.block != nil {
		<-s.block
	}
	return s.inject(s.Dataplane.Sync(ctx, state))
}

func (s *spy) SyncChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error) {
	s.calls, s.changes = append(s.calls, "changes"), changes
	if s.planPanics {
		s.planPanics = false
		pe := &dataplane.PlanPanicError{Value: "nil pointer dereference", Stack: []byte("goroutine 1")}
		for _, c := range changes {
			pe.Services = append(pe.Services, c.Name)
		}
		return nil, pe
	}
	return s.inject(s.Dataplane.SyncChanges(ctx, changes))
}

func (s *spy) Prefill(ctx context.Context, state *model.State) (*dataplane.Result, error) {
	s.calls, s.state = append(s.calls, "prefill"), state
	return s.Dataplane.Prefill(ctx, state)
}

func (s *spy) PrefillChanges(ctx context.Context, changes []model.Change) (*dataplane.Result, error) {
	s.calls, s.changes = append(s.calls, "prefill changes"), changes
	return s.Dataplane.PrefillChanges(ctx, changes)
}

func (s *spy) inject(res *dataplane.Result, err error) (*dataplane.Result, error) {
	if err != nil {
		return res, err
	}
	res.Sweeping = res.Sweeping || s.sweeping
	res.NeedsState = res.NeedsState || s.needsState
	res.Errors = append(res.Errors, s.extra...)
	return res, nil
}

// setup tunes a test's proxier and node; the zero value is a proxier of
// node-a, with address 192.0.2.10, syncing every 30 seconds.
type setup struct {
	node    *model.Node
	period  time.Duration
	now     func() time.Time
	log     *zap.Logger
	metrics *metrics.Metrics
	events  events.Recorder
	records *status.Writer
	traffic *traffic.Collector
	legacy  func(ctx context.Context) (legacyiptables.Report, error)
	request func()
	// programming and synced are Config's Programming and Synced.
	programming func()
	synced      func(full bool)
	// listen is how the health-check node ports listen; nil listens on
	// a loopback port.
	listen func(netip.AddrPort) (net.Listener, error)
	// withoutDummy makes the node's kernel one without the dummy driver,
	// where binding a service IP fails.
	withoutDummy bool
}

// testProxier is a Proxier on a fake node, with what a test looks at.
type testProxier struct {
	*Proxier
	node    *dataplanetest.Node
	kernel  *spy
	metrics *metrics.Metrics
}

// newTestProxier returns a Proxier syncing into a real Dataplane on a
// fake node; its health-check servers are closed at the test's end.
func newTestProxier(t *testing.T, s setup) *testProxier {
	t.Helper()
	n, err := dataplanetest.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.withoutDummy {
		n.Links = dummytest.New(&dummytest.Options{WithoutDriver: true})
	}
	d, err := n.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if s.node == nil {
		s.node = &model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}
	}
	if s.period == 0 {
		s.period = 30 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	if s.events == nil {
		s.events = &reasonRecorder{}
	}
	if s.listen == nil {
		s.listen = func(netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	}
	hc := healthcheck.NewServiceServers(healthcheck.ServiceConfig{Log: zap.NewNop(), Node: s.node.Name, Healthy: func() bool { return true }, Listen: s.listen})
	t.Cleanup(func() { hc.Close(context.Background()) })
	k := &spy{Dataplane: d}
	p := New(Config{
		Log: s.log, Dataplane: k, Tracker: watcher.NewTracker(watcher.TrackerConfig{Node: *s.node}), Metrics: s.metrics,
		Health: testHealth(s.period, s.now, s.metrics), Events: s.events, HealthChecks: hc, Records: s.records,
		Traffic: s.traffic, RemoveLegacy: s.legacy, RequestSync: s.request, Now: s.now,
		Programming: s.programming, Synced: s.synced,
	})
	return &testProxier{Proxier: p, node: n, kernel: k, metrics: s.metrics}
}

// listed feeds the manifests and marks Services and EndpointSlices listed.
func (p *testProxier) listed(t *testing.T, manifests ...string) {
	t.Helper()
	for _, m := range manifests {
		feed(t, p.tracker, m)
	}
	p.tracker.MarkSynced(watcher.Services)
	p.tracker.MarkSynced(watcher.EndpointSlices)
}

// breakSet destroys the set behind the Dataplane's back, so that adding
// entries to it fails (and with it the sync, its rules not in place),
// until the function returned makes it again.
func (p *testProxier) breakSet(t *testing.T, name string) (restore func()) {
	t.Helper()
	h, _, ok := p.node.Sets.Set(name)
	if !ok {
		t.Fatalf("no set %s: %s", name, p.node.Sets.Dump())
	}
	c := p.node.Sets.Dial()
	if err := c.Destroy(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := c.Create(context.Background(), h.Set, ipset.Exclusive); err != nil {
			t.Fatal(err)
		}
	}
}

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

// statusCode serves one request and returns the answer's status code.
func statusCode(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code
}

// testHealth returns the health of a proxier syncing every period, its
// answers counted in m.
func testHealth(period time.Duration, now func() time.Time, m *metrics.Metrics) *healthcheck.ProxyHealth {
	healthz, livez := m.AnswerCounters()
	return healthcheck.NewProxyHealth(period, now, false, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, healthz, livez)
}

// reasonRecorder keeps the reasons of the Events it is given.
type reasonRecorder struct{ reasons []string }

func (r *reasonRecorder) Eventf(_ v1.ObjectReference, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

func (r *reasonRecorder) Shared(_ string, _ v1.ObjectReference, _, reason, _, _ string) {
	r.reasons = append(r.reasons, reason)
}

// webManifest is the Service and EndpointSlice most tests feed.
const webManifest = kubetest.WebManifest
