package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// fakeRecorder keeps the Events it is given.
type fakeRecorder struct{ events []recordedEvent }

type recordedEvent struct {
	object, eventType, reason, note string
}

func (r *fakeRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, _, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	r.events = append(r.events, recordedEvent{regarding.Kind + " " + regarding.Namespace + "/" + regarding.Name, eventType, reason, note})
}

// take returns the Events recorded since the last take.
func (r *fakeRecorder) take() []recordedEvent {
	out := r.events
	r.events = nil
	return out
}

// problemErrors returns what the dataplane reports of two services
// claiming one cluster IP and port and a third with a bad port.
func problemErrors(t *testing.T) []error {
	t.Helper()
	ip := netip.MustParseAddr("10.96.0.10")
	port := func(ns, name string) model.ServicePort {
		return model.ServicePort{Name: model.ServicePortName{Namespace: ns, Name: name, Port: "http"},
			Protocol: model.TCP, Port: 80, ClusterIPs: []netip.Addr{ip}}
	}
	bad := port("demo", "bad")
	bad.ClusterIPs, bad.Port = []netip.Addr{netip.MustParseAddr("10.96.0.11")}, 0
	d := plan.Build(&model.State{Node: model.Node{Name: "node-a"},
		Services: []model.ServicePort{port("demo", "first"), port("other", "second"), bad}}, nftrules.Render)
	if len(d.Errors) != 2 {
		t.Fatalf("errors %v, want a field error and a conflict", d.Errors)
	}
	return d.Errors
}

// A conflict is recorded on both Services, a bad field on its Service,
// each once while it lasts and again when it comes back.
func TestProblemEvents(t *testing.T) {
	errs := problemErrors(t)
	rec := &fakeRecorder{}
	var p problemEvents
	p.report(rec, errs)
	got := rec.take()
	want := []recordedEvent{
		{"Service demo/bad", "Warning", reasonInvalidField, `service port demo/bad:http is not programmed: field port: must be 1-65535`},
		{"Service other/second", "Warning", reasonConflict, "virtual server tcp 10.96.0.10:80 of service port other/second:http is not programmed: service port demo/first:http claims it first; the rest of other/second:http is programmed"},
		{"Service demo/first", "Warning", reasonConflict, "virtual server tcp 10.96.0.10:80 of service port demo/first:http is also claimed by service port other/second:http, which does not get it"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
	p.report(rec, errs)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("problems that persist recorded again: %v", got)
	}
	p.report(rec, errs[1:])
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a problem going away recorded: %v", got)
	}
	p.report(rec, errs)
	if got := rec.take(); len(got) != 1 || got[0].reason != reasonInvalidField {
		t.Errorf("the field error coming back: %v, want it recorded again", got)
	}
}

// Two ports of one Service claiming a virtual server make one Event, and
// errors that concern no Service (the node's, failed operations) none.
func TestProblemEventsOneService(t *testing.T) {
	rec := &fakeRecorder{}
	var p problemEvents
	vk := plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: model.TCP}
	p.report(rec, []error{
		&plan.ConflictError{Service: model.ServicePortName{Namespace: "demo", Name: "web", Port: "b"}, Virtual: vk,
			Owner: model.ServicePortName{Namespace: "demo", Name: "web", Port: "a"}},
		&model.FieldError{Object: "node node-a", Field: "scheduler", Reason: "unknown"},
		&dataplane.OpError{Op: plan.Bind{}, Err: context.Canceled},
	})
	if got := rec.take(); len(got) != 1 || got[0].object != "Service demo/web" || !strings.Contains(got[0].note, "demo/web:a") {
		t.Errorf("events %v, want one on demo/web naming both ports", got)
	}
}

// The daemon records the problems of its syncs; the log line of a
// conflict names both service ports.
func TestDaemonProblemEvents(t *testing.T) {
	errs := problemErrors(t)
	if msg := errs[1].Error(); !strings.Contains(msg, "other/second") || !strings.Contains(msg, "demo/first") {
		t.Errorf("conflict log line %q does not name both service ports", msg)
	}
	rec := &fakeRecorder{}
	fallback := &model.SchedulerError{Service: model.ServicePortName{Namespace: "demo", Name: "cache"},
		Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler}
	k := &fakeKernel{problems: append(errs, fallback)}
	m := newMetrics()
	d := &daemon{log: zap.NewNop(), kernel: k, metrics: m, health: newHealth(30*time.Second, time.Now, false, m),
		events: rec, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})}
	d.hc = newHCServers(zap.NewNop(), "node-a", func() bool { return true })
	defer d.hc.close(context.Background())
	for range 2 {
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.take(); len(got) != 4 || got[3].reason != reasonUnknownScheduler {
		t.Errorf("events after two syncs: %v, want 4, the last of the scheduler fallback", got)
	}
	if got := promtestutil.ToFloat64(m.schedulerFallbacks); got != 1 {
		t.Errorf("scheduler fallbacks: %v, want 1", got)
	}
}

// A service port with an unknown scheduler, one the kernel lacks, or a
// setting it is programmed without gets a Warning on its Service naming
// the annotation and value, once while it lasts.
func TestSchedulerProblemEvents(t *testing.T) {
	name := func(svc string) model.ServicePortName {
		return model.ServicePortName{Namespace: "demo", Name: svc, Port: "http"}
	}
	missing := fmt.Errorf("IPVS scheduler %q: %w", "twos", dataplane.ErrNoScheduler)
	errs := []error{
		&model.SchedulerError{Service: name("typo"), Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler},
		&model.SchedulerError{Service: name("twos"), Scheduler: "twos", Fallback: "rr", Err: missing},
		&model.SettingError{Service: name("flags"), Field: model.FieldSchedulerFlags, Value: "sh-port", Reason: "the lc scheduler does not read them"},
		&model.SettingError{Service: name("drain"), Field: watcher.AnnotationDrainTimeout, Value: "soon", Reason: "not a duration"},
	}
	rec := &fakeRecorder{}
	var p problemEvents
	p.report(rec, errs)
	got := rec.take()
	want := []recordedEvent{
		{"Service demo/typo", "Warning", reasonUnknownScheduler, `service port demo/typo:http: annotation ipvsplane.io/scheduler (or kube-router.io/service.scheduler) names "fastest", which is not an IPVS scheduler (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos); it is programmed with the node's scheduler rr`},
		{"Service demo/twos", "Warning", reasonMissingScheduler, `service port demo/twos:http: the kernel lacks the IPVS scheduler "twos" that annotation ipvsplane.io/scheduler (or kube-router.io/service.scheduler) names (IPVS scheduler "twos": the kernel has no such IPVS scheduler); it is programmed with the node's scheduler rr`},
		{"Service demo/flags", "Warning", reasonIgnoredSetting, `service port demo/flags:http: annotation ipvsplane.io/scheduler-flags (or kube-router.io/service.schedflags): "sh-port" is ignored: the lc scheduler does not read them`},
		{"Service demo/drain", "Warning", reasonIgnoredSetting, `service port demo/drain:http: annotation ipvsplane.io/drain-timeout: "soon" is ignored: not a duration`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
	p.report(rec, errs)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("problems that persist recorded again: %v", got)
	}
	p.report(rec, errs[1:])
	p.report(rec, errs)
	if got := rec.take(); len(got) != 1 || got[0].reason != reasonUnknownScheduler {
		t.Errorf("the unknown scheduler coming back: %v, want it recorded again", got)
	}
}
