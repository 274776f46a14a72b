package watcher

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// FuzzParseManifests feeds arbitrary files to the parser and what it
// returns to the tracker: nothing may panic, every error must locate
// itself in the file, and nothing the conversion lets through may be
// rejected by the dataplane.
func FuzzParseManifests(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		objs, errs := ParseManifests("f.yaml", data)
		for _, err := range errs {
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.File != "f.yaml" || ie.Line < 1 || ie.Line > lines {
				t.Fatalf("error not located in the file's %d lines: %v", lines, err)
			}
		}
		tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}})
		for _, o := range objs {
			if o.Line < 1 || o.Line > lines {
				t.Fatalf("object at line %d of %d", o.Line, lines)
			}
			if err := apply(tr, o.Object); err != nil && !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("conversion error is not an InvalidError: %v", err)
			}
		}
		u := tr.Sync()
		if err := u.State.Node.Validate(); err != nil {
			t.Fatalf("node rejected by the dataplane: %v", err)
		}
		for i := range u.State.Services {
			if err := u.State.Services[i].Validate(); err != nil {
				t.Fatalf("service port rejected by the dataplane: %v", err)
			}
		}
	})
}

// tenantCollision is what one namespace's tenant may write to crash a
// planner that let one port claim a virtual server twice: a NodePort
// Service whose port is its node port, on a node IP it lists as an
// external IP, beside another Service listing that address on that port.
const tenantCollision = `apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {addresses: [{type: InternalIP, address: 192.168.0.10}]}
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: t}
spec:
  type: NodePort
  clusterIP: 10.96.0.20
  externalIPs: [192.168.0.10]
  ports: [{port: 30080, nodePort: 30080, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: t}
spec:
  clusterIP: 10.96.0.21
  externalIPs: [192.168.0.10]
  ports: [{port: 30080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: b-1, namespace: t, labels: {kubernetes.io/service-name: b}}
addressType: IPv4
ports: [{port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.244.1.5], conditions: {ready: true}}]
`

// FuzzManifestsThroughPlanner takes what the watcher makes of arbitrary
// manifests on to the planner, as the daemon does: a full build, then each
// service port changed in place, and removed and put back, one change at a
// time. Nothing may
// panic, and the planner must end where a fresh build of the same state
// does.
func FuzzManifestsThroughPlanner(f *testing.F) {
	f.Add([]byte(tenantCollision))
	rules := func(*model.Node) string { return "" }
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _ := ParseManifests("f.yaml", data)
		tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}})
		for _, o := range objs {
			_ = apply(tr, o.Object)
		}
		u := tr.Sync()
		p := planner.NewPlanner(rules)
		p.Update(&u.State)
		// Each port changed in place (an endpoint's restart), last first,
		// then removed and put back.
		for i := range u.State.Services {
			sp := &u.State.Services[len(u.State.Services)-1-i]
			p.UpdateChanges([]model.Change{{Name: sp.Name, Port: sp}})
		}
		for i := range u.State.Services {
			sp := &u.State.Services[i]
			p.UpdateChanges([]model.Change{{Name: sp.Name}})
			p.UpdateChanges([]model.Change{{Name: sp.Name, Port: sp}})
		}
		want := plan.Build(&u.State, rules)
		got, owners := p.Desired()
		if !reflect.DeepEqual(owners, want.Services) || !reflect.DeepEqual(got, want.Kernel) {
			t.Fatalf("after removing and putting back each port, the planner's owners %v, want %v", owners, want.Services)
		}
	})
}
