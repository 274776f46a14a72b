package watcher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// benchObjects makes n services of one port with a slice of 10 endpoints
// each.
func benchObjects(n int) ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	slices := make([]*discoveryv1.EndpointSlice, n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		svcs[i] = service(func(s *v1.Service) {
			s.Name = name
			s.Spec.ClusterIPs = []string{fmt.Sprintf("10.96.%d.%d", i/256, i%256)}
		})
		slices[i] = endpointSlice(name+"-1", func(s *discoveryv1.EndpointSlice) {
			s.Labels[LabelServiceName] = name
			for j := range 10 {
				s.Endpoints = append(s.Endpoints, apiEndpoint(fmt.Sprintf("10.%d.%d.%d", 100+j, i/256, i%256)))
			}
		})
	}
	return svcs, slices
}

// BenchmarkTracker measures the first sync of a whole cluster and a sync
// after one endpoint changed, which still returns the whole state.
func BenchmarkTracker(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		svcs, slices := benchObjects(n)
		b.Run(fmt.Sprintf("initial-%d", n), func(b *testing.B) {
			for b.Loop() {
				tr := NewTracker(TrackerConfig{})
				for i := range svcs {
					_ = tr.SetService(svcs[i])
					_ = tr.SetEndpointSlice(slices[i], time.Time{})
				}
				tr.Sync()
			}
		})
		b.Run(fmt.Sprintf("one-change-%d", n), func(b *testing.B) {
			tr, changed := synced(svcs, slices)
			ready := true
			for b.Loop() {
				ready = !ready
				changed.Endpoints[0].Conditions.Ready = ptr(ready)
				_ = tr.SetEndpointSlice(changed, time.Time{})
				if u := tr.Sync(); len(u.Changed) != 1 {
					b.Fatalf("changed %v", u.Changed)
				}
			}
		})
		// What the daemon takes after its first sync: only the change.
		b.Run(fmt.Sprintf("sync-changes-%d", n), func(b *testing.B) {
			tr, changed := synced(svcs, slices)
			ready := true
			b.ReportAllocs()
			for b.Loop() {
				ready = !ready
				changed.Endpoints[0].Conditions.Ready = ptr(ready)
				_ = tr.SetEndpointSlice(changed, time.Time{})
				if u := tr.SyncChanges(); len(u.Changed) != 1 {
					b.Fatalf("changed %v", u.Changed)
				}
			}
		})
	}
}

// synced returns a tracker that has synced the objects once, and a copy
// of the middle slice to change.
func synced(svcs []*v1.Service, slices []*discoveryv1.EndpointSlice) (*Tracker, *discoveryv1.EndpointSlice) {
	tr := NewTracker(TrackerConfig{})
	for i := range svcs {
		_ = tr.SetService(svcs[i])
		_ = tr.SetEndpointSlice(slices[i], time.Time{})
	}
	tr.Sync()
	return tr, slices[len(slices)/2].DeepCopy()
}

// BenchmarkParseManifests parses one file of 10,000 services and their
// slices.
func BenchmarkParseManifests(b *testing.B) {
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: bench}\nspec:\n  clusterIP: 10.96.%d.%d\n  ports: [{name: http, port: 80}]\n---\n", i, i/256, i%256)
		fmt.Fprintf(&sb, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-%d-1\n  namespace: bench\n  labels: {kubernetes.io/service-name: svc-%d}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n", i, i)
		for j := range 10 {
			fmt.Fprintf(&sb, "- addresses: [10.%d.%d.%d]\n", 100+j, i/256, i%256)
		}
		sb.WriteString("---\n")
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		objs, errs := ParseManifests("bench.yaml", data)
		if len(objs) != 20000 || len(errs) != 0 {
			b.Fatalf("%d objects, errors %v", len(objs), errs)
		}
	}
}
