//go:build hosttest

package controlplane

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The control plane serves the API through RESTConfig and Kubeconfig, and
// what it stored survives a stop and a kill of the API server.
func TestRestartKeepsData(t *testing.T) {
	start := time.Now()
	cp := New(t, &Config{ExtraAPIServerArgs: []string{"--service-node-port-range=31000-31009"}})
	t.Logf("control plane ready in %v at %s", time.Since(start).Round(time.Millisecond), cp.URL())
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	fileClient, err := kubernetes.NewForConfig(fromFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The extra argument reached the API server.
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "np"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{{Port: 80}}},
	}
	if svc, err = client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if np := svc.Spec.Ports[0].NodePort; np < 31000 || np > 31009 {
		t.Errorf("node port %d outside --service-node-port-range=31000-31009", np)
	}

	cp.StopAPIServer()
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err == nil {
		t.Fatal("Get succeeded with the API server stopped")
	}
	start = time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server restarted in %v", time.Since(start).Round(time.Millisecond))
	cp.KillAPIServer()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// The kubeconfig's client, made before the restarts, works after them.
	got, err := fileClient.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("after restart: data %v, want k=v", got.Data)
	}
}
