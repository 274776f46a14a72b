package watcher

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	base := model.Node{Name: "node-a", Addresses: addrs("192.0.2.1")}
	withNode := func(n string) func(*discoveryv1.EndpointSlice) {
		return func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].NodeName = &n }
	}
	epAt := func(addr string, port uint16) model.Endpoint { return modelEndpoint(addr, port) }
	web := func(eps ...model.Endpoint) model.ServicePort {
		return servicePort(func(p *model.ServicePort) { p.Endpoints = eps })
	}
	name := func(svc, port string) model.ServicePortName {
		return model.ServicePortName{Namespace: "default", Name: svc, Port: port}
	}
	type step struct {
		name string
		do   func(tr *Tracker) error
		// notified is whether OnChange ran.
		notified bool
		// pending service and endpoint changes after the step.
		pendingSvc, pendingEps int
		// errField is the field an error names; empty for no error.
		errField string
		// sync, if set, is the update a Sync after the step returns.
		sync *Update
	}
	steps := []step{{
		name:       "service added",
		do:         func(tr *Tracker) error { return tr.SetService(service()) },
		notified:   true,
		pendingSvc: 1,
	}, {
		name: "slice added with a trigger time",
		do: func(tr *Tracker) error {
			return tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"))), t0)
		},
		notified:   true,
		pendingSvc: 1, pendingEps: 1,
		sync: &Update{
			State:        model.State{Node: base, Services: []model.ServicePort{web(epAt("10.244.1.5", 8080))}},
			Changed:      []model.ServicePortName{name("web", "http")},
			TriggerTimes: inet.PerFamily[[]time.Time]{{t0}},
		},
	}, {
		name: "same service again changes nothing",
		do:   func(tr *Tracker) error { return tr.SetService(service()) },
	}, {
		name: "same slice again changes nothing",
		do: func(tr *Tracker) error {
			return tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"))), t0.Add(time.Second))
		},
		sync: &Update{State: model.State{Node: base, Services: []model.ServicePort{web(epAt("10.244.1.5", 8080))}}},
	}, {
		name: "second slice",
		do: func(tr *Tracker) error {
			return tr.SetEndpointSlice(endpointSlice("web-2", withEndpoints(apiEndpoint("10.244.2.5"))), t0.Add(2*time.Second))
		},
		notified:   true,
		pendingEps: 1,
	}, {
		name: "first slice's endpoint moves node",
		do: func(tr *Tracker) error {
			return tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5")), withNode("node-a")), t0.Add(3*time.Second))
		},
		notified:   true,
		pendingEps: 1,
		sync: &Update{
			State: model.State{Node: base, Services: []model.ServicePort{web(
				model.Endpoint{Addr: addrs("10.244.1.5")[0], Port: 8080, Ready: true, Serving: true, NodeName: "node-a"},
				epAt("10.244.2.5", 8080))}},
			Changed:      []model.ServicePortName{name("web", "http")},
			TriggerTimes: inet.PerFamily[[]time.Time]{{t0.Add(2 * time.Second), t0.Add(3 * time.Second)}},
		},
	}, {
		name: "a second service and a slice moved to it",
		do: func(tr *Tracker) error {
			if err := tr.SetService(service(func(s *v1.Service) {
				s.Name, s.Spec.ClusterIPs = "api", []string{"10.96.0.20"}
			})); err != nil {
				return err
			}
			return tr.SetEndpointSlice(endpointSlice("web-2", func(s *discoveryv1.EndpointSlice) {
				s.Labels[LabelServiceName] = "api"
			}, withEndpoints(apiEndpoint("10.244.2.5"))), time.Time{})
		},
		notified:   true,
		pendingSvc: 1, pendingEps: 2,
		sync: &Update{
			State: model.State{Node: base, Services: []model.ServicePort{
				servicePort(func(p *model.ServicePort) {
					p.Name.Name, p.ClusterIPs = "api", addrs("10.96.0.20")
					p.Endpoints = []model.Endpoint{epAt("10.244.2.5", 8080)}
				}),
				web(model.Endpoint{Addr: addrs("10.244.1.5")[0], Port: 8080, Ready: true, Serving: true, NodeName: "node-a"}),
			}},
			Changed: []model.ServicePortName{name("api", "http"), name("web", "http")},
		},
	}, {
		name: "invalid update removes the service",
		do: func(tr *Tracker) error {
			return tr.SetService(service(func(s *v1.Service) { s.Spec.Ports[0].Port = 0 }))
		},
		notified:   true,
		pendingSvc: 1,
		errField:   "spec.ports[0].port",
	}, {
		name: "this node's object, and another's ignored",
		do: func(tr *Tracker) error {
			n := &v1.Node{}
			n.Name = "node-b"
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}}
			if err := tr.SetNode(n); err != nil {
				return err
			}
			n = n.DeepCopy()
			n.Name = "node-a"
			n.Status.Addresses[0].Address = "10.0.0.5"
			return tr.SetNode(n)
		},
		notified:   true,
		pendingSvc: 1,
		sync: &Update{
			State: model.State{Node: model.Node{Name: "node-a", Addresses: addrs("192.0.2.1"), NodeIPs: addrs("10.0.0.5")}, Services: []model.ServicePort{
				servicePort(func(p *model.ServicePort) {
					p.Name.Name, p.ClusterIPs = "api", addrs("10.96.0.20")
					p.Endpoints = []model.Endpoint{epAt("10.244.2.5", 8080)}
				}),
			}},
			Changed:     []model.ServicePortName{name("web", "http")},
			NodeChanged: true,
		},
	}, {
		name: "delete",
		do: func(tr *Tracker) error {
			tr.DeleteService("default", "api")
			tr.DeleteNode("node-b")
			tr.DeleteNode("node-a")
			return nil
		},
		notified:   true,
		pendingSvc: 1,
		sync: &Update{
			State:       model.State{Node: base},
			Changed:     []model.ServicePortName{name("api", "http")},
			NodeChanged: true,
		},
	}, {
		// kube-proxy's EndpointsChangeTracker does the same: a deleted
		// slice's trigger time is its last update's.
		name: "deleting a slice drops its service's pending trigger times",
		do: func(tr *Tracker) error {
			if err := tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.9"))), t0.Add(time.Minute)); err != nil {
				return err
			}
			tr.DeleteEndpointSlice("default", "web-1")
			return nil
		},
		notified:   true,
		pendingEps: 1,
		sync:       &Update{State: model.State{Node: base}},
	}, {
		name: "deleting what is not there changes nothing",
		do: func(tr *Tracker) error {
			tr.DeleteEndpointSlice("default", "web-1")
			tr.DeleteService("default", "web")
			tr.DeleteNode("node-a")
			return nil
		},
	}}

	notified := false
	tr := NewTracker(TrackerConfig{Node: base, OnChange: func(inet.PerFamily[bool]) { notified = true }})
	for _, st := range steps {
		notified = false
		err := st.do(tr)
		switch {
		case st.errField == "" && err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case st.errField != "":
			checkErrors(t, []error{err}, []string{st.errField})
		}
		if notified != st.notified {
			t.Errorf("%s: notified %v, want %v", st.name, notified, st.notified)
		}
		if s, e := tr.Pending(); s != st.pendingSvc || e != st.pendingEps {
			t.Errorf("%s: pending %d service and %d endpoint changes, want %d and %d", st.name, s, e, st.pendingSvc, st.pendingEps)
		}
		if st.sync == nil {
			continue
		}
		u := tr.Sync()
		want := *st.sync
		want.Whole = true // always, from Sync
		if diff := cmp.Diff(&want, u, append(cmpOpts, cmpopts.IgnoreFields(Update{}, "Changes", "ServicePorts"))...); diff != "" {
			t.Errorf("%s: sync (-want +got):\n%s", st.name, diff)
		}
		checkChanges(t, st.name, u)
		if s, e := tr.Pending(); s != 0 || e != 0 {
			t.Errorf("%s: %d and %d changes pending after a sync", st.name, s, e)
		}
	}
}

// checkChanges checks that an update's Changes are its Changed ports as
// they are in its State, and ServicePorts their number.
func checkChanges(t *testing.T, name string, u *Update) {
	t.Helper()
	if u.ServicePorts != len(u.State.Services) {
		t.Errorf("%s: ServicePorts %d, state has %d", name, u.ServicePorts, len(u.State.Services))
	}
	if len(u.Changes) != len(u.Changed) {
		t.Fatalf("%s: %d changes for %d changed ports", name, len(u.Changes), len(u.Changed))
	}
	for i, c := range u.Changes {
		if c.Name != u.Changed[i] {
			t.Errorf("%s: change %d is %v, changed %v", name, i, c.Name, u.Changed[i])
		}
		j := slices.IndexFunc(u.State.Services, func(p model.ServicePort) bool { return p.Name == c.Name })
		switch {
		case j < 0 && c.Port != nil:
			t.Errorf("%s: change of %v carries a port the state lacks", name, c.Name)
		case j >= 0 && (c.Port == nil || !cmp.Equal(*c.Port, u.State.Services[j], cmpOpts...)):
			t.Errorf("%s: change of %v is not the state's port", name, c.Name)
		}
	}
}

// SyncChanges hands over the same changes as Sync without the services
// that did not change, and the whole state again when the node changed.
func TestTrackerSyncChanges(t *testing.T) {
	cfg := TrackerConfig{Node: model.Node{Name: "node-a"}}
	whole, changes := NewTracker(cfg), NewTracker(cfg)
	both := func(f func(tr *Tracker) error) {
		t.Helper()
		for _, tr := range []*Tracker{whole, changes} {
			if err := f(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	both(func(tr *Tracker) error { return tr.SetService(service()) })
	both(func(tr *Tracker) error {
		return tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"))), time.Time{})
	})
	whole.Sync()
	changes.Sync()
	both(func(tr *Tracker) error {
		return tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.6"))), time.Time{})
	})
	w, c := whole.Sync(), changes.SyncChanges()
	if len(c.State.Services) != 0 || c.ServicePorts != len(w.State.Services) || c.Whole || !w.Whole {
		t.Errorf("SyncChanges handed over %d service ports (count %d, whole %v), want none (count %d, not whole; Sync's whole %v)",
			len(c.State.Services), c.ServicePorts, c.Whole, len(w.State.Services), w.Whole)
	}
	if diff := cmp.Diff(w.Changes, c.Changes, cmpOpts...); diff != "" || len(c.Changes) != 1 {
		t.Errorf("changes differ (-Sync +SyncChanges):\n%s", diff)
	}
	both(func(tr *Tracker) error {
		n := &v1.Node{}
		n.Name = "node-a"
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}}
		return tr.SetNode(n)
	})
	if c := changes.SyncChanges(); !c.NodeChanged || !c.Whole || len(c.State.Services) != c.ServicePorts || c.ServicePorts == 0 {
		t.Errorf("a node change: NodeChanged %v, whole %v, %d of %d service ports", c.NodeChanged, c.Whole, len(c.State.Services), c.ServicePorts)
	}
}

func TestTrackerSynced(t *testing.T) {
	calls := 0
	tr := NewTracker(TrackerConfig{OnChange: func(inet.PerFamily[bool]) { calls++ }})
	if tr.Synced() || !tr.NodeKnown() {
		t.Fatal("synced before any input, or the node not known without PodCIDRsFromNode")
	}
	tr.MarkSynced(Services)
	if tr.Synced() {
		t.Fatal("synced with services only")
	}
	tr.MarkSynced(EndpointSlices)
	tr.MarkSynced(EndpointSlices)
	if !tr.Synced() {
		t.Fatal("not synced after both inputs")
	}
	if calls != 2 {
		t.Errorf("OnChange called %d times, want once per input", calls)
	}
}

func TestTrackerInvalidSlice(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	if err := tr.SetService(service()); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"))), time.Time{}); err != nil {
		t.Fatal(err)
	}
	tr.Sync()
	err := tr.SetEndpointSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1"))), time.Time{})
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("invalid slice: got %v", err)
	}
	u := tr.Sync()
	if len(u.State.Services) != 1 || len(u.State.Services[0].Endpoints) != 0 {
		t.Errorf("invalid slice's endpoints kept: %+v", u.State.Services)
	}
}

// The node's own addresses read again replace the configured ones, with
// or without a Node object, and only a change is a node change.
func TestTrackerSetAddresses(t *testing.T) {
	tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a", Addresses: addrs("192.0.2.1")}})
	tr.Sync()
	tr.SetAddresses(addrs("192.0.2.1"))
	if u := tr.SyncChanges(); u.NodeChanged || u.Whole {
		t.Error("the same addresses are a node change")
	}
	tr.SetAddresses(addrs("192.0.2.1", "198.51.100.7"))
	if u := tr.SyncChanges(); !u.NodeChanged || !u.Whole || !slices.Equal(u.State.Node.Addresses, addrs("192.0.2.1", "198.51.100.7")) {
		t.Errorf("new address: NodeChanged %v, whole %v, addresses %v", u.NodeChanged, u.Whole, u.State.Node.Addresses)
	}
	n := &v1.Node{}
	n.Name = "node-a"
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
	if err := tr.SetNode(n); err != nil {
		t.Fatal(err)
	}
	tr.SetAddresses(addrs("198.51.100.7"))
	u := tr.SyncChanges()
	if got := u.State.Node; !slices.Equal(got.Addresses, addrs("198.51.100.7")) || !slices.Equal(got.NodeIPs, addrs("10.0.0.5")) {
		t.Errorf("with a Node object: addresses %v, node IPs %v", got.Addresses, got.NodeIPs)
	}
}

// OnNode sees this node's Node objects, invalid ones too, and nil when it
// is deleted; other nodes' objects are not passed on.
func TestTrackerOnNode(t *testing.T) {
	var seen []*v1.Node
	tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}, OnNode: func(n *v1.Node) { seen = append(seen, n) }})
	other := &v1.Node{}
	other.Name = "node-b"
	tr.SetNode(other)
	bad := &v1.Node{}
	bad.Name = "node-a"
	bad.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "not an address"}}
	if err := tr.SetNode(bad); err == nil {
		t.Error("an invalid address: no error")
	}
	tr.DeleteNode("node-b")
	tr.DeleteNode("node-a")
	if len(seen) != 2 || seen[0] != bad || seen[1] != nil {
		t.Errorf("OnNode saw %v, want the invalid node-a, then nil", seen)
	}
}

// With PodCIDRsFromNode (detectLocalMode NodeCIDR) the node's pod ranges
// come from its Node object, the first of each family, and the tracker
// waits for them as kube-proxy waits at start.
func TestTrackerPodCIDRsFromNode(t *testing.T) {
	base := model.Node{Name: "node-a", ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	tr := listedTracker(TrackerConfig{Node: base, PodCIDRsFromNode: true})
	if tr.Synced() || tr.NodeKnown() {
		t.Fatal("synced, or the node known, before the Node was read")
	}
	n := &v1.Node{}
	n.Name = "node-a"
	if err := tr.SetNode(n); err != nil {
		t.Fatal(err)
	}
	if tr.Synced() || tr.NodeKnown() {
		t.Fatal("synced, or the node known, with a Node that has no pod ranges")
	}
	n.Spec.PodCIDRs = []string{"10.244.3.0/24", "fd00:10:244:3::/64", "10.244.9.0/24"}
	if err := tr.SetNode(n); err != nil {
		t.Fatal(err)
	}
	if !tr.NodeKnown() {
		t.Error("the node not known with its pod ranges read")
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24"), netip.MustParsePrefix("fd00:10:244:3::/64")}
	if got := tr.Sync().State.Node.ClusterCIDRs; !tr.Synced() || !slices.Equal(got, want) {
		t.Errorf("synced %v, pod ranges %v, want %v", tr.Synced(), got, want)
	}
	bad := n.DeepCopy()
	bad.Spec.PodCIDRs = []string{"10.244.3.0"}
	if err := tr.SetNode(bad); err == nil || !strings.Contains(err.Error(), "spec.podCIDRs[0]") {
		t.Errorf("bad pod range: %v", err)
	}
	tr.DeleteNode("node-a")
	if got := tr.Sync().State.Node.ClusterCIDRs; !tr.Synced() || !slices.Equal(got, want) {
		t.Errorf("after the Node went: synced %v, pod ranges %v, want %v", tr.Synced(), got, want)
	}
}

// listedTracker returns a tracker whose Services and EndpointSlices are
// listed, so that only the Node can hold its first sync back.
func listedTracker(cfg TrackerConfig) *Tracker {
	tr := NewTracker(cfg)
	tr.MarkSynced(Services)
	tr.MarkSynced(EndpointSlices)
	return tr
}

// With WaitForNodeIPs, nothing is synced or prefilled until a Node with
// IPs is read, as kube-proxy waits for its Node before it proxies, or
// until the wait is given up.
func TestTrackerWaitsForNodeIPs(t *testing.T) {
	changes := 0
	tr := listedTracker(TrackerConfig{Node: model.Node{Name: "node-a"}, WaitForNodeIPs: true, OnChange: func(inet.PerFamily[bool]) { changes++ }})
	if tr.Synced() || tr.NodeKnown() {
		t.Fatal("synced, or the node known, before the Node was read")
	}
	n := &v1.Node{}
	n.Name = "node-a"
	if err := tr.SetNode(n); err != nil {
		t.Fatal(err)
	}
	if tr.Synced() {
		t.Fatal("synced with a Node that has no IPs")
	}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.0.10"}}
	if err := tr.SetNode(n); err != nil {
		t.Fatal(err)
	}
	if !tr.Synced() || !tr.NodeKnown() {
		t.Error("not synced with the Node's IPs read")
	}
	if tr.StopWaitingForNode() {
		t.Error("still waiting after the Node's IPs were read")
	}

	tr = listedTracker(TrackerConfig{Node: model.Node{Name: "node-a"}, WaitForNodeIPs: true, OnChange: func(inet.PerFamily[bool]) { changes++ }})
	before := changes
	if !tr.StopWaitingForNode() || !tr.Synced() || changes != before+1 {
		t.Errorf("after the wait was given up: synced %v, %d changes notified", tr.Synced(), changes-before)
	}
}

// The trigger times of an update are those of each family's slices, as
// kube-proxy's proxier of each family records its own.
func TestTrackerTriggerTimesByFamily(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	if err := tr.SetService(service(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"} })); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := tr.SetEndpointSlice(endpointSlice("web-4", withEndpoints(apiEndpoint("10.244.1.5"))), t0); err != nil {
		t.Fatal(err)
	}
	v6 := endpointSlice("web-6", withEndpoints(apiEndpoint("fd00:244::5")), func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 })
	if err := tr.SetEndpointSlice(v6, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := tr.Sync().TriggerTimes
	if want := (inet.PerFamily[[]time.Time]{{t0}, {t0.Add(time.Second)}}); !reflect.DeepEqual(got, want) {
		t.Errorf("trigger times %v, want %v", got, want)
	}
}

// Arrivals are when each changed service's first pending change reached
// the tracker, counted once its inputs are listed: the listing's objects
// are not changes.
func TestTrackerArrivals(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tr := NewTracker(TrackerConfig{Now: func() time.Time { return now }})
	if err := tr.SetService(service()); err != nil {
		t.Fatal(err)
	}
	tr.MarkSynced(Services)
	tr.MarkSynced(EndpointSlices)
	if got := tr.Sync().Arrivals; len(got) != 0 {
		t.Errorf("the listed service arrived at %v, want no arrival", got)
	}
	first := now
	if err := tr.SetEndpointSlice(endpointSlice("web-4", withEndpoints(apiEndpoint("10.244.1.5"))), time.Time{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if err := tr.SetEndpointSlice(endpointSlice("web-4", withEndpoints(apiEndpoint("10.244.1.6"))), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetService(service(func(s *v1.Service) { s.Name = "api"; s.Spec.ClusterIP = "10.96.0.20" })); err != nil {
		t.Fatal(err)
	}
	got := tr.SyncChanges().Arrivals
	slices.SortFunc(got, time.Time.Compare)
	if want := []time.Time{first, now}; !reflect.DeepEqual(got, want) {
		t.Errorf("arrivals %v, want %v (web's first change, api's)", got, want)
	}
	if got := tr.SyncChanges().Arrivals; len(got) != 0 {
		t.Errorf("a sync with nothing pending has arrivals %v", got)
	}
}

// OnChange gets the families a change concerns, as kube-proxy queues the
// sync of each family's proxier: a Service and the Node both, an
// EndpointSlice its own; listing an input, the node's addresses and the
// wait for the Node given up, none.
func TestTrackerOnChangeFamilies(t *testing.T) {
	var got []inet.PerFamily[bool]
	tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}, WaitForNodeIPs: true, OnChange: func(f inet.PerFamily[bool]) { got = append(got, f) }})
	tr.SetService(service())
	tr.SetEndpointSlice(endpointSlice("web-4", withEndpoints(apiEndpoint("10.244.1.5"))), time.Time{})
	tr.SetEndpointSlice(endpointSlice("web-6", withEndpoints(apiEndpoint("fd00:244::5")), func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 }), time.Time{})
	tr.DeleteEndpointSlice("default", "web-6")
	tr.MarkSynced(Services)
	tr.SetAddresses(addrs("192.0.2.1"))
	tr.StopWaitingForNode()
	n := &v1.Node{}
	n.Name = "node-a"
	tr.SetNode(n)
	tr.DeleteNode("node-a")
	want := []inet.PerFamily[bool]{{true, true}, {true, false}, {false, true}, {false, true}, {}, {}, {}, {true, true}, {true, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("families queued %v, want %v", got, want)
	}
}
