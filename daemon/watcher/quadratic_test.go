package watcher

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// manyPortsService is a Service of n ports named p0, p1, ..., with one
// slice of one port and m endpoints for each.
func manyPortsService(n, m int) (*v1.Service, []*discoveryv1.EndpointSlice) {
	svc := service(func(s *v1.Service) { s.Spec.Ports = nil })
	var slices []*discoveryv1.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: name, Port: int32(1 + i), Protocol: v1.ProtocolTCP})
		slices = append(slices, endpointSlice(fmt.Sprintf("web-%d", i), func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{slicePortOf(name, v1.ProtocolTCP, 8080)}
			for j := range m {
				s.Endpoints = append(s.Endpoints, apiEndpoint(fmt.Sprintf("10.%d.%d.%d", i%200, j/256, j%256)))
			}
		}))
	}
	return svc, slices
}

// A port's endpoint list holds room for its own endpoints only, not for
// those of every slice of its Service: 50 ports with a slice of 1,000
// endpoints each held 2.5 million slots.
func TestJoinSizesEachPortByItsSlices(t *testing.T) {
	svc, slices := manyPortsService(50, 1000)
	ports, errs := ServicePorts(svc, slices)
	if len(errs) != 0 || len(ports) != 50 {
		t.Fatalf("%d ports, errors %v", len(ports), errs)
	}
	slots := 0
	for _, p := range ports {
		if len(p.Endpoints) != 1000 {
			t.Fatalf("port %s: %d endpoints, want 1000", p.Name, len(p.Endpoints))
		}
		slots += cap(p.Endpoints)
	}
	if slots > 50*1000 {
		t.Errorf("%d endpoint slots for 50,000 endpoints", slots)
	}
}

// BenchmarkManyPorts measures one change to a Service of many ports: its
// conversion, join and comparison with the last sync.
func BenchmarkManyPorts(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) {
			svc, _ := manyPortsService(n, 0)
			tr := NewTracker(TrackerConfig{})
			if err := tr.SetService(svc); err != nil {
				b.Fatal(err)
			}
			tr.Sync()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				svc.Spec.Ports[n/2].Port = int32(20000 + i%2)
				if err := tr.SetService(svc); err != nil {
					b.Fatal(err)
				}
				if u := tr.SyncChanges(); len(u.Changed) != 1 {
					b.Fatalf("changed %v", u.Changed)
				}
			}
		})
	}
}

// BenchmarkJoin measures the first sync of a Service of 50 ports with a
// slice of 1,000 endpoints each.
func BenchmarkJoin(b *testing.B) {
	svc, slices := manyPortsService(50, 1000)
	tr := NewTracker(TrackerConfig{})
	_ = tr.SetService(svc)
	for _, s := range slices {
		_ = tr.SetEndpointSlice(s, time.Time{})
	}
	b.ReportAllocs()
	for b.Loop() {
		if u := tr.Sync(); u.ServicePorts != 50 {
			b.Fatalf("%d ports", u.ServicePorts)
		}
		// Marks the service changed again.
		tr.DeleteService(svc.Namespace, svc.Name)
		tr.Sync()
		_ = tr.SetService(svc)
	}
}
