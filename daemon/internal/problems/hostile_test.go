package problems

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// hostileService is a Service of 100 ports whose annotations are as large
// as a tenant may write: a 250 KiB scheduler-flags list of words that are
// no flag, and a 100 KiB scheduler name.
func hostileService() *v1.Service {
	svc := &v1.Service{}
	svc.Namespace, svc.Name = "tenant", "hostile"
	svc.Spec.ClusterIPs = []string{"10.96.1.1"}
	for i := range 100 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
	}
	var flags strings.Builder
	for i := 0; flags.Len() < 250<<10; i++ {
		fmt.Fprintf(&flags, "x%d,", i)
	}
	svc.Annotations = map[string]string{
		watcher.AnnotationSchedulerFlags: flags.String(),
		watcher.AnnotationScheduler:      strings.Repeat("s", 100<<10),
	}
	return svc
}

// plainService is a Service of one port with a slice of one endpoint,
// whose readiness the benchmark flips.
func plainService() (*v1.Service, *discoveryv1.EndpointSlice) {
	svc := &v1.Service{}
	svc.Namespace, svc.Name = "other", "web"
	svc.Spec.ClusterIPs = []string{"10.96.2.2"}
	svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80}}
	slice := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	slice.Namespace, slice.Name, slice.Labels = "other", "web-1", map[string]string{discoveryv1.LabelServiceName: "web"}
	portName, port := "http", int32(8080)
	slice.Ports = []discoveryv1.EndpointPort{{Name: &portName, Port: &port}}
	ready := true
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	return svc, slice
}

// hostilePipeline reads objs into a tracker, plans the first sync and
// reports its problems, as the daemon does.
type hostilePipeline struct {
	tracker  *watcher.Tracker
	planner  *planner.Planner
	problems Events
	rec      *fakeRecorder
}

func newHostilePipeline(t testing.TB, hostile bool) (*hostilePipeline, *discoveryv1.EndpointSlice) {
	p := &hostilePipeline{tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}}),
		planner: planner.NewPlanner(nftrules.Render), rec: &fakeRecorder{}}
	if hostile {
		RecordInvalid(p.rec, p.tracker.SetService(hostileService()))
	}
	svc, slice := plainService()
	if err := p.tracker.SetService(svc); err != nil {
		t.Fatal(err)
	}
	if err := p.tracker.SetEndpointSlice(slice, time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, errs := p.planner.Update(&p.tracker.Sync().State)
	p.problems.Report(p.rec, errs)
	return p, slice
}

// syncChanges plans the changes since the last sync and reports the
// problems, returning them.
func (p *hostilePipeline) syncChanges() []error {
	u := p.tracker.SyncChanges()
	_, errs := p.planner.UpdateChanges(u.Changes)
	p.problems.Report(p.rec, errs)
	return errs
}

// The problems a hostile Service's annotations make are bounded: a few
// per port, each value short, however much the annotations hold, and
// their Events are few.
func TestHostileAnnotationsBounded(t *testing.T) {
	p, _ := newHostilePipeline(t, true)
	errs := p.syncChanges()
	const ports, perPort, maxValue = 100, 2, 256
	if len(errs) > ports*perPort {
		t.Errorf("%d problems reported for %d ports, want at most %d", len(errs), ports, ports*perPort)
	}
	for _, err := range errs {
		if len(err.Error()) > 4*maxValue {
			t.Fatalf("a problem of %d bytes: %.200s…", len(err.Error()), err)
		}
	}
	if n := len(p.rec.events); n > ports*perPort {
		t.Errorf("%d Events, want at most %d", n, ports*perPort)
	}
}

// BenchmarkUnrelatedChange measures a sync after one endpoint of a plain
// Service changed, with and without a hostile Service on the node: the
// hostile one must not slow it.
func BenchmarkUnrelatedChange(b *testing.B) {
	for _, hostile := range []bool{false, true} {
		b.Run(fmt.Sprintf("hostile=%v", hostile), func(b *testing.B) {
			p, slice := newHostilePipeline(b, hostile)
			ready := true
			b.ReportAllocs()
			for b.Loop() {
				ready = !ready
				slice.Endpoints[0].Conditions.Ready = &ready
				if err := p.tracker.SetEndpointSlice(slice, time.Time{}); err != nil {
					b.Fatal(err)
				}
				p.syncChanges()
			}
		})
	}
}

// BenchmarkHostileFirstSync measures reading a hostile Service and its
// first sync.
func BenchmarkHostileFirstSync(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newHostilePipeline(b, true)
	}
}
