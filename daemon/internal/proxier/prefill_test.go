package proxier

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// While the start's listing goes on, the daemon prefills what is listed so
// far, then what was listed since, at most once per prefillEvery and no
// sooner than twice the last round's time, and does not count that as a
// sync: the first sync, once everything is listed, is a full one with the
// whole state.
func TestDaemonPrefill(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	k := &fakeKernel{}
	m := metrics.New()
	d := &Proxier{
		log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, clock.now, m), now: clock.now,
		tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}}),
		hc:      testServiceServers("node-a", nil),
	}
	defer d.hc.Close(context.Background())
	feed(t, d.tracker, webManifest)
	ctx := context.Background()

	d.prefill(ctx)
	d.prefill(ctx)
	if !slices.Equal(k.calls, []string{"prefill"}) || len(k.state.Services) != 1 {
		t.Fatalf("calls %v with %d service ports, want one prefill with web", k.calls, len(k.state.Services))
	}
	// The next takes what was listed since.
	clock.advance(prefillEvery)
	feed(t, d.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	d.prefill(ctx)
	if got := gatheredHistogramCount(t, m, "ipvsplane_prefill_duration_seconds"); !slices.Equal(k.calls, []string{"prefill", "prefill changes"}) || got != 2 {
		t.Errorf("calls %v, %d prefills observed; want the changes prefilled after prefillEvery", k.calls, got)
	}
	if len(k.changes) != 1 || k.changes[0].Port == nil || k.changes[0].Port.Endpoints[0].Addr.String() != "10.244.1.11" {
		t.Errorf("the changes prefilled: %+v", k.changes)
	}
	if got := gatheredValue(t, m, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != 0 {
		t.Errorf("a prefill set the last sync's time: %v", got)
	}

	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)
	if err := d.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.calls, []string{"prefill", "prefill changes", "sync"}) || len(k.state.Services) != 1 || !d.lastFull {
		t.Errorf("calls %v with %d service ports, full %v; want a full sync of the whole state", k.calls, len(k.state.Services), d.lastFull)
	}
	if got := d.hc.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("health-check ports after the first sync: %v", got)
	}
}

// gatheredHistogramCount returns how many observations the histogram name
// without labels holds.
func gatheredHistogramCount(t *testing.T, m *metrics.Metrics, name string) uint64 {
	t.Helper()
	for _, mf := range gather(t, m, name) {
		for _, metric := range mf.GetMetric() {
			return metric.GetHistogram().GetSampleCount()
		}
	}
	return 0
}
