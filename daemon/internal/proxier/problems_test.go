package proxier

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/problems"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// clusterIPService is the manifest of Service ns/name with port http at
// ip:80; annotations, if any, are its metadata's.
func clusterIPService(ns, name, ip, annotations string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s, annotations: {%s}}\nspec:\n  clusterIP: %s\n  ports: [{name: http, port: 80}]\n",
		name, ns, annotations, ip)
}

// Services a sync programs with problems: two claim one cluster IP and
// port, demo/first first, and one asks for a scheduler IPVS does not
// have.
var (
	firstManifest  = clusterIPService("demo", "first", "10.96.0.10", "")
	secondManifest = clusterIPService("other", "second", "10.96.0.10", "")
	cacheManifest  = clusterIPService("demo", "cache", "10.96.0.30", "ipvsplane.io/scheduler: fastest")
)

// The proxier records the problems of its syncs as Events, once while
// they last.
func TestProblemEvents(t *testing.T) {
	rec := &reasonRecorder{}
	p := newTestProxier(t, setup{events: rec})
	p.listed(t, firstManifest, secondManifest, cacheManifest)
	for range 2 {
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.reasons; len(got) != 3 || got[2] != problems.ReasonUnknownScheduler {
		t.Errorf("events after two syncs: %v, want 3 (one on each side of the conflict), the last of the scheduler fallback", got)
	}
	if got := gatheredValue(t, p.metrics, "ipvsplane_scheduler_fallbacks"); got != 1 {
		t.Errorf("scheduler fallbacks: %v, want 1", got)
	}
}

// A conflict (or a scheduler fallback) that persists is logged once while
// it lasts, as its Event is, and again when it comes back; a failed
// operation, the sync's own, is logged at every sync. The log line of a
// conflict names both service ports.
func TestLogsPersistingProblemOnce(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	p := newTestProxier(t, setup{log: zap.New(core)})
	p.listed(t)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The new cluster IPs cannot go into their set: every sync tries
	// again and fails.
	p.breakSet(t, "KUBE-CLUSTER-IP")
	p.listed(t, firstManifest, secondManifest, cacheManifest)
	logged := func() (conflicts, schedulers, ops int) {
		for _, e := range logs.TakeAll() {
			if e.Message != "sync problem" {
				continue
			}
			msg := fmt.Sprint(e.ContextMap()["error"])
			switch {
			case strings.Contains(msg, "other/second") && strings.Contains(msg, "demo/first"):
				conflicts++
			case strings.Contains(msg, "demo/cache"):
				schedulers++
			case strings.Contains(msg, "KUBE-CLUSTER-IP"):
				ops++
			}
		}
		return
	}
	syncs := func(n int) {
		for range n {
			p.Sync(context.Background())
		}
	}
	syncs(3)
	if c, s, o := logged(); c != 1 || s != 1 || o != 3 {
		t.Errorf("three syncs logged the conflict %d times, the scheduler fallback %d, the failed operation %d; want 1, 1, 3", c, s, o)
	}
	p.tracker.DeleteService("other", "second")
	syncs(1)
	feed(t, p.tracker, secondManifest)
	syncs(2)
	if c, s, o := logged(); c != 1 || s != 0 || o != 3 {
		t.Errorf("the conflict gone and back: logged %d times (scheduler fallback %d, failed operation %d); want 1, 0, 3", c, s, o)
	}
}
