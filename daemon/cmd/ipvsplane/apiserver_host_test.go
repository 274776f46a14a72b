//go:build hosttest && !vmtest

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The daemon against a real kube-apiserver through --kubeconfig, on a
// fake node (the host has no IPVS): it lists, syncs, and follows an
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
	ctx := context.Background()
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

	n := newNode(t)
	a, _, _ := testApp(n, nil)
	r := startApp(t, a, n, slices.Concat(runArgs, []string{"--kubeconfig", path})...)
	// web's virtual server, on the cluster IP the API server chose.
	vip := "TCP " + svc.Spec.ClusterIP + ":80"
	r.await("the service", vip, "10.244.1.10:8080")
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.10"}, NodeName: new("node-b")})
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.await("the second endpoint", vip, "10.244.1.10:8080", "10.244.2.10:8080")
	if err := r.stop(); err != nil {
		t.Errorf("the daemon's exit: %v", err)
	}
}
