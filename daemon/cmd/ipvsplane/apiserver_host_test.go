//go:build hosttest && !vmtest

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The daemon against a real kube-apiserver through --kubeconfig, with a
// fake kernel (the host has no IPVS): it lists, syncs, and follows an
// EndpointSlice update.
func TestRunAgainstAPIServer(t *testing.T) {
	cp := controlplane.New(t, nil)
	kubeconfig, err := cp.Kubeconfig(cp.URL())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := client.CoreV1().Services("default").Create(ctx, kubetest.Service("default", "web", "", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.10"}, NodeName: new("node-a")}},
	}
	if slice, err = client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	k := &fakeKernel{synced: make(chan []model.ServicePort, 64)}
	a, _, stderr := fakeKernelApp(k, nil)
	root := a.rootCommand()
	root.SetArgs([]string{"run", "--kubeconfig", path, "--hostname-override=node-a", "--ipvs-min-sync-period=0s",
		"--healthz-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0", "--state-file="})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	// web finds the service port among those a sync handed over (the
	// API server's own "kubernetes" service is there too).
	web := func(ports []model.ServicePort) *model.ServicePort {
		for i := range ports {
			if ports[i].Name.Namespace == "default" && ports[i].Name.Name == "web" {
				return &ports[i]
			}
		}
		return nil
	}
	waitFor := func(what string, ok func(*model.ServicePort) bool) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case ports := <-k.synced:
				if p := web(ports); p != nil && ok(p) {
					return
				}
			case err := <-done:
				t.Fatalf("the daemon stopped: %v\n%s", err, stderr)
			case <-deadline:
				t.Fatalf("no sync with %s within a minute:\n%s", what, stderr)
			}
		}
	}
	waitFor("the service", func(p *model.ServicePort) bool {
		return len(p.ClusterIPs) == 1 && p.ClusterIPs[0].String() == svc.Spec.ClusterIP && len(p.Endpoints) == 1
	})
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.10"}, NodeName: new("node-b")})
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the second endpoint", func(p *model.ServicePort) bool { return len(p.Endpoints) == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the daemon's exit: %v", err)
	}
}
