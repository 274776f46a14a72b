package watcher

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The Kubernetes source driven through client-go's informers by a fake
// clientset: adds, updates and deletes reach the tracker's state.
func TestWatchKubernetes(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
	otherNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	otherNode.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.6"}}
	proxied := service(func(s *v1.Service) {
		s.Name, s.Labels = "proxied", map[string]string{LabelServiceProxyName: "other"}
	})
	client := fake.NewClientset(
		service(), endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"))),
		proxied, node, otherNode,
	)
	// Changes made before an informer's watch is open would be lost by
	// the fake, so wait for the watches.
	var mu sync.Mutex
	watching := map[string]bool{}
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		watching[a.GetResource().Resource] = true
		mu.Unlock()
		return false, nil, nil
	})

	var errs []error
	var errMu sync.Mutex
	tr := NewTracker(TrackerConfig{Node: dataplane.Node{Name: "node-a"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- WatchKubernetes(ctx, KubernetesConfig{Client: client, Tracker: tr, NodeName: "node-a", OnError: func(err error) {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("WatchKubernetes returned %v, want context.Canceled", err)
		}
	}()
	waitFor(t, "watches open and inputs synced", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return tr.Synced() && watching["services"] && watching["endpointslices"] && watching["nodes"]
	})

	var triggers []time.Time
	expect := func(what string, want []dataplane.ServicePort) {
		t.Helper()
		var last []dataplane.ServicePort
		ok := poll(func() bool {
			u := tr.Sync()
			triggers = append(triggers, u.TriggerTimes...)
			last = u.State.Services
			return cmp.Equal(want, last, cmpOpts...)
		})
		if !ok {
			t.Fatalf("%s: services (-want +got):\n%s", what, cmp.Diff(want, last, cmpOpts...))
		}
	}
	web := func(eps ...dataplane.Endpoint) dataplane.ServicePort {
		return servicePort(func(p *dataplane.ServicePort) { p.Endpoints = eps })
	}

	expect("initial list", []dataplane.ServicePort{web(modelEndpoint("10.244.1.5", 8080))})
	if got, want := tr.Sync().State.Node, (dataplane.Node{Name: "node-a", Zone: "zone-a", NodeIPs: addrs("10.0.0.5")}); !cmp.Equal(got, want, cmpOpts...) {
		t.Errorf("node %+v, want %+v", got, want)
	}

	ctxAPI := context.Background()
	trigger := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	slice := endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.5"), apiEndpoint("10.244.1.6")))
	slice.Annotations = map[string]string{AnnotationTriggerTime: trigger.Format(time.RFC3339)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctxAPI, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice updated", []dataplane.ServicePort{web(modelEndpoint("10.244.1.5", 8080), modelEndpoint("10.244.1.6", 8080))})
	if !slices.Contains(triggers, trigger) {
		t.Errorf("trigger times %v do not hold the slice's %v", triggers, trigger)
	}

	api := service(func(s *v1.Service) { s.Name, s.Spec.ClusterIPs = "api", []string{"10.96.0.20"} })
	if _, err := client.CoreV1().Services("default").Create(ctxAPI, api, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiSlice := endpointSlice("api-1", withEndpoints(apiEndpoint("10.244.2.1")))
	apiSlice.Labels[LabelServiceName] = "api"
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctxAPI, apiSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiPort := servicePort(func(p *dataplane.ServicePort) {
		p.Name.Name, p.ClusterIPs = "api", addrs("10.96.0.20")
		p.Endpoints = []dataplane.Endpoint{modelEndpoint("10.244.2.1", 8080)}
	})
	expect("service and slice added", []dataplane.ServicePort{apiPort, web(modelEndpoint("10.244.1.5", 8080), modelEndpoint("10.244.1.6", 8080))})

	bad := api.DeepCopy()
	bad.Spec.Ports[0].Port = 0
	if _, err := client.CoreV1().Services("default").Update(ctxAPI, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("invalid update skipped", []dataplane.ServicePort{web(modelEndpoint("10.244.1.5", 8080), modelEndpoint("10.244.1.6", 8080))})
	errMu.Lock()
	if len(errs) != 1 {
		t.Errorf("errors reported: %v, want the invalid port", errs)
	}
	errMu.Unlock()

	labelled := service(func(s *v1.Service) { s.Labels = map[string]string{LabelServiceProxyName: "other"} })
	if _, err := client.CoreV1().Services("default").Update(ctxAPI, labelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service handed to another proxy", nil)

	if _, err := client.CoreV1().Services("default").Update(ctxAPI, api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service fixed", []dataplane.ServicePort{apiPort})
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctxAPI, "api-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice deleted", []dataplane.ServicePort{servicePort(func(p *dataplane.ServicePort) {
		p.Name.Name, p.ClusterIPs = "api", addrs("10.96.0.20")
	})})
	if err := client.CoreV1().Services("default").Delete(ctxAPI, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service deleted", nil)

	if err := client.CoreV1().Nodes().Delete(ctxAPI, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node deleted", func() bool { return cmp.Equal(tr.Sync().State.Node, dataplane.Node{Name: "node-a"}, cmpOpts...) })
}

// poll reports whether cond became true within a generous deadline; it is
// a wait for asynchronous delivery, not a timing check.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("%s: not reached", what)
	}
}

func TestTriggerTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		annotation string
		want       time.Time
	}{
		{"2026-01-01T12:00:05Z", start.Add(5 * time.Second)},
		{"2026-01-01T12:00:05.25Z", start.Add(5250 * time.Millisecond)},
		{"2026-01-01T11:59:00Z", time.Time{}}, // before the watch began
		{"yesterday", time.Time{}},
		{"", time.Time{}},
	}
	for _, tt := range tests {
		s := endpointSlice("web-1")
		s.Annotations = map[string]string{AnnotationTriggerTime: tt.annotation}
		if got := triggerTime(s, start); !got.Equal(tt.want) {
			t.Errorf("triggerTime(%q) = %v, want %v", tt.annotation, got, tt.want)
		}
	}
}
