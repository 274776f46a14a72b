package proxier

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A sync whose planning panics does not take the daemon down: the
// service ports being planned are left out, with an Event each, the next
// sync compares everything with the rest, and a new version of a port left
// out is tried again.
func TestContainsPlanPanic(t *testing.T) {
	rec := &reasonRecorder{}
	requested := 0
	p := newTestProxier(t, setup{events: rec, request: func() { requested++ }})
	k := p.kernel
	ctx := context.Background()
	p.listed(t, webManifest, strings.NewReplacer("name: web", "name: api", "10.96.0.80", "10.96.0.81", "30080", "30081", "32000", "32001").Replace(webManifest))
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	k.planPanics = true
	feed(t, p.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	if err := p.Sync(ctx); err == nil {
		t.Fatal("a sync whose planning panicked succeeded")
	}
	if got := gatheredValue(t, p.metrics, "ipvsplane_plan_panics_total"); got != 1 || requested != 1 || !slices.Contains(rec.reasons, "PlanningPanicked") {
		t.Errorf("panics counted %v, syncs requested %d, events %v", got, requested, rec.reasons)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range k.state.Services {
		names = append(names, sp.Name.Name)
	}
	if last := k.calls[len(k.calls)-1]; last != "sync" || !slices.Equal(names, []string{"api"}) {
		t.Errorf("after the panic: %s of %v, want a full sync of api alone", last, names)
	}
	if got := p.node.IPVS.Dump(); strings.Contains(got, "10.96.0.80") || !strings.Contains(got, "10.96.0.81") {
		t.Errorf("IPVS with web left out:\n%s", got)
	}

	feed(t, p.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.12", 1))
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if last := k.calls[len(k.calls)-1]; last != "changes" || len(k.changes) != 1 || k.changes[0].Name.Name != "web" {
		t.Errorf("web's next version: %s of %v, want it tried again as a change", last, k.changes)
	}
	if got := p.node.IPVS.Dump(); !strings.Contains(got, "TCP 10.96.0.80:80 rr\n  -> 10.244.1.12:8080 masq 1") {
		t.Errorf("IPVS with web tried again:\n%s", got)
	}
}
