package watcher_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/daemon/watcher/clientset"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The Kubernetes source driven by client-go's fake clientset through
// watcher/clientset: adds, updates and deletes reach the tracker's state.
// The fake cannot stream the initial listing, so this takes the list path.
func TestWatchKubernetes(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
	otherNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	otherNode.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.6"}}
	proxied := watcher.TestService(func(s *v1.Service) {
		s.Name, s.Labels = "proxied", map[string]string{watcher.LabelServiceProxyName: "other"}
	})
	client := fake.NewClientset(
		watcher.TestService(), watcher.TestEndpointSlice("web-1", watcher.TestWithEndpoints(watcher.TestAPIEndpoint("10.244.1.5"))),
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
	tr := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- watcher.WatchKubernetes(ctx, watcher.KubernetesConfig{Client: clientset.New(client), Tracker: tr, NodeName: "node-a", OnError: func(err error) {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("watcher.WatchKubernetes returned %v, want context.Canceled", err)
		}
	}()
	watcher.TestWaitFor(t, "watches open and inputs synced", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return tr.Synced() && watching["services"] && watching["endpointslices"] && watching["nodes"]
	})

	var triggers []time.Time
	expect := func(what string, want []model.ServicePort) {
		t.Helper()
		var last []model.ServicePort
		ok := watcher.TestPoll(func() bool {
			u := tr.Sync()
			triggers = append(triggers, u.TriggerTimes.Get(inet.IPv4)...)
			last = u.State.Services
			return cmp.Equal(want, last, watcher.TestCmpOpts...)
		})
		if !ok {
			t.Fatalf("%s: services (-want +got):\n%s", what, cmp.Diff(want, last, watcher.TestCmpOpts...))
		}
	}
	web := func(eps ...model.Endpoint) model.ServicePort {
		return watcher.TestServicePort(func(p *model.ServicePort) { p.Endpoints = eps })
	}

	expect("initial list", []model.ServicePort{web(watcher.TestModelEndpoint("10.244.1.5", 8080))})
	if got, want := tr.Sync().State.Node, (model.Node{Name: "node-a", Zone: "zone-a", NodeIPs: watcher.TestAddrs("10.0.0.5")}); !cmp.Equal(got, want, watcher.TestCmpOpts...) {
		t.Errorf("node %+v, want %+v", got, want)
	}

	ctxAPI := context.Background()
	trigger := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	slice := watcher.TestEndpointSlice("web-1", watcher.TestWithEndpoints(watcher.TestAPIEndpoint("10.244.1.5"), watcher.TestAPIEndpoint("10.244.1.6")))
	slice.Annotations = map[string]string{watcher.AnnotationTriggerTime: trigger.Format(time.RFC3339)}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctxAPI, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice updated", []model.ServicePort{web(watcher.TestModelEndpoint("10.244.1.5", 8080), watcher.TestModelEndpoint("10.244.1.6", 8080))})
	if !slices.Contains(triggers, trigger) {
		t.Errorf("trigger times %v do not hold the slice's %v", triggers, trigger)
	}

	api := watcher.TestService(func(s *v1.Service) { s.Name, s.Spec.ClusterIPs = "api", []string{"10.96.0.20"} })
	if _, err := client.CoreV1().Services("default").Create(ctxAPI, api, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiSlice := watcher.TestEndpointSlice("api-1", watcher.TestWithEndpoints(watcher.TestAPIEndpoint("10.244.2.1")))
	apiSlice.Labels[watcher.LabelServiceName] = "api"
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctxAPI, apiSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiPort := watcher.TestServicePort(func(p *model.ServicePort) {
		p.Name.Name, p.ClusterIPs = "api", watcher.TestAddrs("10.96.0.20")
		p.Endpoints = []model.Endpoint{watcher.TestModelEndpoint("10.244.2.1", 8080)}
	})
	expect("service and slice added", []model.ServicePort{apiPort, web(watcher.TestModelEndpoint("10.244.1.5", 8080), watcher.TestModelEndpoint("10.244.1.6", 8080))})

	bad := api.DeepCopy()
	bad.Spec.Ports[0].Port = 0
	if _, err := client.CoreV1().Services("default").Update(ctxAPI, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("invalid update skipped", []model.ServicePort{web(watcher.TestModelEndpoint("10.244.1.5", 8080), watcher.TestModelEndpoint("10.244.1.6", 8080))})
	errMu.Lock()
	if len(errs) != 1 {
		t.Errorf("errors reported: %v, want the invalid port", errs)
	}
	errMu.Unlock()

	labelled := watcher.TestService(func(s *v1.Service) { s.Labels = map[string]string{watcher.LabelServiceProxyName: "other"} })
	if _, err := client.CoreV1().Services("default").Update(ctxAPI, labelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service handed to another proxy", nil)

	if _, err := client.CoreV1().Services("default").Update(ctxAPI, api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service fixed", []model.ServicePort{apiPort})
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctxAPI, "api-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice deleted", []model.ServicePort{watcher.TestServicePort(func(p *model.ServicePort) {
		p.Name.Name, p.ClusterIPs = "api", watcher.TestAddrs("10.96.0.20")
	})})
	if err := client.CoreV1().Services("default").Delete(ctxAPI, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("service deleted", nil)

	if err := client.CoreV1().Nodes().Delete(ctxAPI, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	watcher.TestWaitFor(t, "node deleted", func() bool {
		return cmp.Equal(tr.Sync().State.Node, model.Node{Name: "node-a"}, watcher.TestCmpOpts...)
	})
}
