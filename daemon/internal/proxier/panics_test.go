package proxier

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// A sync whose planning panics does not take the daemon down: the
// service ports being planned are left out, with an Event each, the next
// sync compares everything with the rest, and a new version of a port left
// out is tried again.
func TestDaemonContainsPlanPanic(t *testing.T) {
	k := &fakeKernel{}
	m := metrics.New()
	rec := &reasonRecorder{}
	requested := 0
	d := &Proxier{log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m),
		events: rec, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}}),
		requestSync: func() { requested++ }}
	d.hc = testServiceServers("node-a", nil)
	t.Cleanup(func() { d.hc.Close(context.Background()) })
	ctx := context.Background()
	feed(t, d.tracker, webManifest)
	feed(t, d.tracker, strings.ReplaceAll(strings.ReplaceAll(webManifest, "name: web", "name: api"), "10.96.0.10", "10.96.0.11"))
	d.tracker.MarkSynced(watcher.Services)
	d.tracker.MarkSynced(watcher.EndpointSlices)
	if err := d.sync(ctx); err != nil {
		t.Fatal(err)
	}

	k.planPanics = true
	feed(t, d.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	if err := d.sync(ctx); err == nil {
		t.Fatal("a sync whose planning panicked succeeded")
	}
	if got := gatheredValue(t, m, "ipvsplane_plan_panics_total"); got != 1 || requested != 1 || !slices.Contains(rec.reasons, "PlanningPanicked") {
		t.Errorf("panics counted %v, syncs requested %d, events %v", got, requested, rec.reasons)
	}
	if err := d.sync(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range k.state.Services {
		names = append(names, sp.Name.Name)
	}
	if last := k.calls[len(k.calls)-1]; last != "sync" || !slices.Equal(names, []string{"api"}) {
		t.Errorf("after the panic: %s of %v, want a full sync of api alone", last, names)
	}

	feed(t, d.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.12", 1))
	if err := d.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if last := k.calls[len(k.calls)-1]; last != "changes" || len(k.changes) != 1 || k.changes[0].Name.Name != "web" {
		t.Errorf("web's next version: %s of %v, want it tried again as a change", last, k.changes)
	}
}
