package problems

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
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// fakeRecorder keeps the Events it is given.
type fakeRecorder struct {
	events []recordedEvent
	// shared counts the Events recorded as shared by the nodes.
	shared int
}

type recordedEvent struct {
	object, eventType, reason, note string
}

func (r *fakeRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, _, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	r.events = append(r.events, recordedEvent{regarding.Kind + " " + regarding.Namespace + "/" + regarding.Name, eventType, reason, note})
}

func (r *fakeRecorder) Shared(_ string, regarding v1.ObjectReference, eventType, reason, action, note string) {
	r.shared++
	r.Eventf(regarding, eventType, reason, action, note)
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
			Protocol: inet.TCP, Port: 80, ClusterIPs: []netip.Addr{ip}}
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
	var p Events
	p.Report(rec, errs)
	got := rec.take()
	want := []recordedEvent{
		{"Service demo/bad", "Warning", ReasonInvalidField, `service port demo/bad:http is not programmed: field port: must be 1-65535`},
		{"Service other/second", "Warning", ReasonConflict, "virtual server TCP 10.96.0.10:80 of service port other/second:http is not programmed: service port demo/first:http claims it first; the rest of other/second:http is programmed"},
		{"Service demo/first", "Warning", ReasonConflict, "virtual server TCP 10.96.0.10:80 of service port demo/first:http is also claimed by service port other/second:http, which does not get it"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
	p.Report(rec, errs)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("problems that persist recorded again: %v", got)
	}
	p.Report(rec, errs[1:])
	if got := rec.take(); len(got) != 0 {
		t.Errorf("a problem going away recorded: %v", got)
	}
	p.Report(rec, errs)
	if got := rec.take(); len(got) != 1 || got[0].reason != ReasonInvalidField {
		t.Errorf("the field error coming back: %v, want it recorded again", got)
	}
}

// Two ports of one Service claiming a virtual server make one Event, and
// errors that concern no Service (the node's, failed operations) none.
func TestProblemEventsOneService(t *testing.T) {
	rec := &fakeRecorder{}
	var p Events
	vk := plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: inet.TCP}
	p.Report(rec, []error{
		&plan.ConflictError{Service: model.ServicePortName{Namespace: "demo", Name: "web", Port: "b"}, Virtual: vk,
			Owner: model.ServicePortName{Namespace: "demo", Name: "web", Port: "a"}},
		&model.FieldError{Object: "node node-a", Field: "scheduler", Reason: "unknown"},
		&dataplane.OpError{Op: plan.Bind{}, Err: context.Canceled},
	})
	if got := rec.take(); len(got) != 1 || got[0].object != "Service demo/web" || !strings.Contains(got[0].note, "demo/web:a") {
		t.Errorf("events %v, want one on demo/web naming both ports", got)
	}
}

// A service port with an unknown scheduler, one the kernel lacks, or a
// setting it is programmed without gets a Warning on its Service naming
// the annotation and value, once while it lasts.
func TestSchedulerProblemEvents(t *testing.T) {
	name := func(svc string) model.ServicePortName {
		return model.ServicePortName{Namespace: "demo", Name: svc, Port: "http"}
	}
	missing := fmt.Errorf("IPVS scheduler %q: %w", "twos", dataplane.ErrSchedulerNotSupported)
	errs := []error{
		&model.SchedulerError{Service: name("typo"), Scheduler: "fastest", Fallback: "rr", Err: model.ErrUnknownScheduler},
		&model.SchedulerError{Service: name("twos"), Scheduler: "twos", Fallback: "rr", Err: missing},
		&model.SettingError{Service: name("flags"), Field: model.FieldSchedulerFlags, Value: "sh-port", Reason: "the lc scheduler does not read them"},
		&model.SettingError{Service: name("drain"), Field: watcher.AnnotationDrainTimeout, Value: "soon", Reason: "not a duration"},
	}
	rec := &fakeRecorder{}
	var p Events
	p.Report(rec, errs)
	got := rec.take()
	want := []recordedEvent{
		{"Service demo/typo", "Warning", ReasonUnknownScheduler, `service port demo/typo:http: annotation ipvsplane.io/scheduler (or kube-router.io/service.scheduler) names "fastest", which is not an IPVS scheduler (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos); it is programmed with the node's scheduler rr`},
		{"Service demo/twos", "Warning", ReasonMissingScheduler, `service port demo/twos:http: the kernel lacks the IPVS scheduler "twos" that annotation ipvsplane.io/scheduler (or kube-router.io/service.scheduler) names (IPVS scheduler "twos": dataplane: IPVS scheduler not supported by this kernel); it is programmed with the node's scheduler rr`},
		{"Service demo/flags", "Warning", ReasonIgnoredSetting, `service port demo/flags:http: annotation ipvsplane.io/scheduler-flags (or kube-router.io/service.schedflags): "sh-port" is ignored: the lc scheduler does not read them`},
		{"Service demo/drain", "Warning", ReasonIgnoredSetting, `service port demo/drain:http: annotation ipvsplane.io/drain-timeout: "soon" is ignored: not a duration`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
	p.Report(rec, errs)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("problems that persist recorded again: %v", got)
	}
	p.Report(rec, errs[1:])
	p.Report(rec, errs)
	if got := rec.take(); len(got) != 1 || got[0].reason != ReasonUnknownScheduler {
		t.Errorf("the unknown scheduler coming back: %v, want it recorded again", got)
	}
}

// A scheduler the node does not allow, an external IP outside its ranges
// and a load-balancer address on a protected port get a Warning on
// their Service naming what the tenant wrote and why it is ignored.
func TestGuardProblemEvents(t *testing.T) {
	name := func(svc string) model.ServicePortName {
		return model.ServicePortName{Namespace: "demo", Name: svc, Port: "http"}
	}
	errs := []error{
		&model.SchedulerError{Service: name("mh"), Scheduler: "mh", Fallback: "rr", Err: model.ErrSchedulerNotAllowed},
		&model.SettingError{Service: name("ext"), Field: model.FieldExternalIPs, Value: "198.51.100.1 and 2 more", Reason: "outside the node's external-IP ranges (--external-ip-ranges)"},
		&model.SettingError{Service: name("lb"), Field: model.FieldLoadBalancerIPs, Value: "192.168.0.10", Reason: "a protected port"},
	}
	rec := &fakeRecorder{}
	var p Events
	p.Report(rec, errs)
	want := []recordedEvent{
		{"Service demo/mh", "Warning", ReasonUnknownScheduler, `service port demo/mh:http: annotation ipvsplane.io/scheduler (or kube-router.io/service.scheduler) names "mh", which is not among the schedulers the node allows (--allowed-schedulers); it is programmed with the node's scheduler rr`},
		{"Service demo/ext", "Warning", ReasonIgnoredSetting, `service port demo/ext:http: spec.externalIPs: "198.51.100.1 and 2 more" is ignored: outside the node's external-IP ranges (--external-ip-ranges)`},
		{"Service demo/lb", "Warning", ReasonIgnoredSetting, `service port demo/lb:http: status.loadBalancer.ingress: "192.168.0.10" is ignored: a protected port`},
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
}

// An object read with a bad entry gets a Warning naming the field, on the
// object: the Service, the EndpointSlice, the Node; one that is skipped,
// a Warning saying so.
func TestInvalidObjectEvents(t *testing.T) {
	tr := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})
	svc := &v1.Service{}
	svc.Namespace, svc.Name = "demo", "web"
	svc.Spec.ClusterIPs = []string{"10.96.0.10"}
	svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80}}
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "bogus"}
	slice := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	slice.Namespace, slice.Name, slice.Labels = "demo", "web-1", map[string]string{discoveryv1.LabelServiceName: "web"}
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.1"}}, {Addresses: []string{"10.244.1"}}}
	portName, port := "http", int32(8080)
	slice.Ports = []discoveryv1.EndpointPort{{Name: &portName, Port: &port}}
	node := &v1.Node{}
	node.Name = "node-a"
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0"}}
	bad := svc.DeepCopy()
	bad.Name, bad.Spec.Ports[0].Port = "bad", 0

	rec := &fakeRecorder{}
	RecordInvalid(rec, tr.SetService(svc))
	RecordInvalid(rec, tr.SetEndpointSlice(slice, time.Time{}))
	RecordInvalid(rec, tr.SetNode(node))
	RecordInvalid(rec, tr.SetService(bad))
	want := []recordedEvent{
		{"Service demo/web", "Warning", ReasonInvalidEntry, `field spec.loadBalancerSourceRanges[1]: "bogus" is not a CIDR; the range is left out; the rest of the Service is used`},
		{"EndpointSlice demo/web-1", "Warning", ReasonInvalidEntry, `field endpoints[1].addresses[0]: "10.244.1" is not an IP address; the endpoint is left out; the rest of the EndpointSlice is used`},
		{"Node /node-a", "Warning", ReasonInvalidEntry, `field status.addresses[0].address: "10.0.0" is not an IP address; it is left out; the rest of the Node is used`},
		{"Service demo/bad", "Warning", ReasonInvalidObject, `field spec.ports[0].port: 0 is not from 1 to 65535; the Service is not programmed`},
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
	if u := tr.Sync(); len(u.State.Services) != 1 || len(u.State.Services[0].Endpoints) != 1 || len(u.State.Services[0].LoadBalancerSourceRanges) != 1 {
		t.Errorf("the rest of the objects is not programmed: %+v", u.State.Services)
	}
}

// A version of a slice with 1,000 bad endpoints makes one Event, shared
// by the nodes, naming as many as fit; so do the problems of a Service's
// 100 ports found by one sync.
func TestProblemsAggregated(t *testing.T) {
	slice := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	slice.Namespace, slice.Name, slice.Labels = "tenant", "web-1", map[string]string{discoveryv1.LabelServiceName: "web"}
	for i := range 1000 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("224.0.%d.%d", i/256, i%256)}})
	}
	tr := watcher.NewTracker(watcher.TrackerConfig{})
	rec := &fakeRecorder{}
	RecordInvalid(rec, tr.SetEndpointSlice(slice, time.Time{}))
	got := rec.take()
	if len(got) != 1 || got[0].reason != ReasonInvalidEntry || len(got[0].note) > maxNote || !strings.HasSuffix(got[0].note, " more") {
		t.Errorf("%d Events, want one summing up the 1,000 bad endpoints: %v", len(got), got)
	}
	if rec.shared != 1 {
		t.Errorf("%d Events shared by the nodes, want 1", rec.shared)
	}

	var errs []error
	for i := range 100 {
		errs = append(errs, &model.SettingError{Service: model.ServicePortName{Namespace: "tenant", Name: "web", Port: fmt.Sprint(i)},
			Field: watcher.AnnotationDrainTimeout, Value: "soon", Reason: "not a duration"})
	}
	var p Events
	p.Report(rec, errs)
	if got := rec.take(); len(got) != 1 || got[0].reason != ReasonIgnoredSetting {
		t.Errorf("%d Events for the problems of 100 ports of one Service, want 1: %v", len(got), got)
	}
}
