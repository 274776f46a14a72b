package main

import (
	"context"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/daemon/watcher/clientset"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dummy"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// The daemon with the Kubernetes source, on client-go's fake clientset:
// the first sync programs the whole state once Services and
// EndpointSlices are listed, an EndpointSlice update is programmed as a
// change, and the daemon stops when its context ends.
func TestRunKubernetesSource(t *testing.T) {
	objs, errs := watcher.ParseManifests("web.yaml", []byte(webManifest))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var initial []runtime.Object
	for _, o := range objs {
		initial = append(initial, o.Object)
	}
	client := fake.NewClientset(initial...)
	k := &fakeKernel{synced: make(chan []model.ServicePort, 16)}
	a, _, stderr := testApp(k, nil)
	a.kubeClient = func(*options) (*watcher.Client, error) { return clientset.New(client), nil }
	sink := &fakeEventSink{}
	a.eventSink = func(*options) (eventSink, error) { return sink, nil }
	var cfg *dataplane.Config
	a.newKernel = func(c *dataplane.Config) (kernel, error) {
		cfg = c
		return k, nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := a.rootCommand()
	root.SetArgs([]string{"run", "--hostname-override=node-a", "--ipvs-min-sync-period=0s",
		"--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	next := func() []model.ServicePort {
		t.Helper()
		select {
		case ports := <-k.synced:
			return ports
		case err := <-done:
			t.Fatalf("the daemon stopped: %v\n%s", err, stderr)
		case <-time.After(30 * time.Second):
			t.Fatalf("no sync within 30s:\n%s", stderr)
		}
		return nil
	}
	ports := next()
	if cfg.ResyncInterval != 30*time.Second {
		t.Errorf("the dataplane rereads the kernel every %v, want the sync period", cfg.ResyncInterval)
	}
	if cfg.DrainTimeout != defaultDrainTimeout {
		t.Errorf("the dataplane's drain bound is %v, want --drain-timeout's default", cfg.DrainTimeout)
	}
	if cfg.Binding != dummy.BindAddresses {
		t.Errorf("the dataplane binds service IPs as %v, want addresses by default", cfg.Binding)
	}
	if len(ports) != 1 || len(ports[0].Endpoints) != 1 || ports[0].Endpoints[0].Addr.String() != "10.244.1.10" {
		t.Fatalf("first sync: %+v", ports)
	}

	slice, err := client.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.10"}, NodeName: new("node-b")})
	if _, err := client.DiscoveryV1().EndpointSlices("demo").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ports = next(); len(ports) == 0; ports = next() {
	}
	if len(ports[0].Endpoints) != 2 {
		t.Errorf("after the update: %+v", ports[0].Endpoints)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the daemon's exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	if k.calls[0] != "sync" || k.calls[len(k.calls)-1] != "changes" {
		t.Errorf("calls: %v", k.calls)
	}
	// kube-proxy's birth cry, on the Node.
	if got := sink.reasons(); len(got) != 1 || got[0] != "Starting" || sink.events[0].Regarding.Name != "node-a" {
		t.Errorf("events %v, want Starting on node-a", got)
	}
}
