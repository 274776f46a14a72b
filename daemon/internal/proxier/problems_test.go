package proxier

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/problems"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
)

// reasonRecorder keeps the reasons of the Events it is given.
type reasonRecorder struct{ reasons []string }

func (r *reasonRecorder) Eventf(_ v1.ObjectReference, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

func (r *reasonRecorder) Shared(_ string, _ v1.ObjectReference, _, reason, _, _ string) {
	r.reasons = append(r.reasons, reason)
}

// problemErrors returns what the dataplane reports of a service with a bad
// port and of two services claiming one cluster IP and port (package
// problems' tests take them from a plan).
func problemErrors() []error {
	name := func(ns, svc string) model.ServicePortName {
		return model.ServicePortName{Namespace: ns, Name: svc, Port: "http"}
	}
	return []error{
		&model.FieldError{Object: "service demo/bad:http", Service: name("demo", "bad"), Field: "port", Reason: "must be 1-65535"},
		&plan.ConflictError{Service: name("other", "second"), Owner: name("demo", "first"),
			Virtual: plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: inet.TCP}},
	}
}

// The daemon records the problems of its syncs; the log line of a
// conflict names both service ports.
func TestDaemonProblemEvents(t *testing.T) {
	errs := problemErrors()
	if msg := errs[1].Error(); !strings.Contains(msg, "other/second") || !strings.Contains(msg, "demo/first") {
		t.Errorf("conflict log line %q does not name both service ports", msg)
	}
	rec := &reasonRecorder{}
	fallback := &model.SchedulerError{Service: model.ServicePortName{Namespace: "demo", Name: "cache"},
		Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler}
	k := &fakeKernel{problems: append(errs, fallback)}
	m := metrics.New()
	d := &Proxier{log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m),
		events: rec, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})}
	d.hc = testServiceServers("node-a", nil)
	defer d.hc.Close(context.Background())
	for range 2 {
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.reasons; len(got) != 4 || got[3] != problems.ReasonUnknownScheduler {
		t.Errorf("events after two syncs: %v, want 4, the last of the scheduler fallback", got)
	}
	if got := gatheredValue(t, m, "ipvsplane_scheduler_fallbacks"); got != 1 {
		t.Errorf("scheduler fallbacks: %v, want 1", got)
	}
}

// A conflict (or a bad field) that persists is logged once while it
// lasts, as its Event is, and again when it comes back; a failed
// operation, the sync's own, is logged at every sync.
func TestDaemonLogsPersistingProblemOnce(t *testing.T) {
	errs := problemErrors()
	core, logs := observer.New(zap.InfoLevel)
	k := &fakeKernel{problems: errs, fail: context.DeadlineExceeded}
	m := metrics.New()
	d := &Proxier{log: zap.New(core), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m),
		events: &reasonRecorder{}, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})}
	d.hc = testServiceServers("node-a", nil)
	defer d.hc.Close(context.Background())
	logged := func() (conflicts, fields, ops int) {
		for _, e := range logs.TakeAll() {
			if e.Message != "sync problem" {
				continue
			}
			msg := fmt.Sprint(e.ContextMap()["error"])
			switch {
			case strings.Contains(msg, "claims it first") || strings.Contains(msg, "demo/first"):
				conflicts++
			case strings.Contains(msg, "demo/bad"):
				fields++
			default:
				ops++
			}
		}
		return
	}
	syncs := func(n int) {
		for range n {
			d.sync(context.Background())
		}
	}
	syncs(3)
	if c, f, o := logged(); c != 1 || f != 1 || o != 3 {
		t.Errorf("three syncs logged the conflict %d times, the bad field %d, the failed operation %d; want 1, 1, 3", c, f, o)
	}
	k.problems = errs[:1]
	syncs(1)
	k.problems = errs
	syncs(2)
	if c, f, o := logged(); c != 1 || f != 0 || o != 3 {
		t.Errorf("the conflict gone and back: logged %d times (bad field %d, failed operation %d); want 1, 0, 3", c, f, o)
	}
}
