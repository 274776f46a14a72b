package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/watcher"
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
// claiming one cluster IP and port and a third with an unknown scheduler.
func problemErrors(t *testing.T) []error {
	t.Helper()
	ip := netip.MustParseAddr("10.96.0.10")
	port := func(ns, name string) dataplane.ServicePort {
		return dataplane.ServicePort{Name: dataplane.ServicePortName{Namespace: ns, Name: name, Port: "http"},
			Protocol: dataplane.TCP, Port: 80, ClusterIPs: []netip.Addr{ip}}
	}
	bad := port("demo", "bad")
	bad.ClusterIPs, bad.Scheduler = []netip.Addr{netip.MustParseAddr("10.96.0.11")}, "nope"
	d := dataplane.Build(&dataplane.State{Node: dataplane.Node{Name: "node-a"},
		Services: []dataplane.ServicePort{port("demo", "first"), port("other", "second"), bad}})
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
		{"Service demo/bad", "Warning", reasonInvalidField, `service port demo/bad:http is not programmed: field scheduler: unknown IPVS scheduler "nope"`},
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
	vk := dataplane.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: dataplane.TCP}
	p.report(rec, []error{
		&dataplane.ConflictError{Service: dataplane.ServicePortName{Namespace: "demo", Name: "web", Port: "b"}, Virtual: vk,
			Owner: dataplane.ServicePortName{Namespace: "demo", Name: "web", Port: "a"}},
		&dataplane.FieldError{Object: "node node-a", Field: "scheduler", Reason: "unknown"},
		&dataplane.OpError{Op: dataplane.Bind{}, Err: context.Canceled},
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
	k := &fakeKernel{problems: errs}
	m := newMetrics()
	d := &daemon{log: zap.NewNop(), kernel: k, metrics: m, health: newHealth(30*time.Second, time.Now, false, m),
		events: rec, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: dataplane.Node{Name: "node-a"}})}
	d.hc = newHCServers(zap.NewNop(), "node-a", func() bool { return true })
	defer d.hc.close(context.Background())
	for range 2 {
		if err := d.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.take(); len(got) != 3 {
		t.Errorf("events after two syncs: %v, want 3", got)
	}
}
