//go:build hosttest

package controlplane

import (
	"context"
	"strings"
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

// Services stored straight into etcd are served by the API server as if
// created through it, with the defaults it applies on read; its repair
// loop records their cluster IPs; a second store of the same name and a
// bad address write nothing; deleting them at once empties the namespace.
// The namespace is the test's own: the API server recreates "kubernetes"
// in default about every 10 s, so default never stays empty.
func TestStoreServices(t *testing.T) {
	cp := New(t, &Config{ExtraAPIServerArgs: []string{"--service-cluster-ip-range=10.96.0.0/16"}})
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "stored"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcs := []v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.16.1", Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.16.2",
			Ports: []v1.ServicePort{{Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}}}},
	}
	if err := cp.StoreServices(ctx, ns, svcs); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Services(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClusterIP != "10.96.16.2" || got.Spec.Ports[0].NodePort != 30053 || got.UID == "" || got.ResourceVersion == "" {
		t.Errorf("stored service b read back as %+v", got)
	}
	if a, err := client.CoreV1().Services(ns).Get(ctx, "a", metav1.GetOptions{}); err != nil || a.ResourceVersion == got.ResourceVersion {
		t.Errorf("services a and b stored at one revision (%v, %v): each must have its own, as created through the API server", a.ResourceVersion, got.ResourceVersion)
	}
	if got.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyCluster || got.Spec.Ports[0].TargetPort.IntValue() != 53 {
		t.Errorf("service b: externalTrafficPolicy %q, targetPort %v: the API server's defaults not applied", got.Spec.ExternalTrafficPolicy, got.Spec.Ports[0].TargetPort)
	}
	// Stored with the service, not left to the repair loop.
	addr, err := client.NetworkingV1().IPAddresses().Get(ctx, "10.96.16.1", metav1.GetOptions{})
	if err != nil {
		t.Errorf("no IPAddress stored for service a's 10.96.16.1: %v", err)
	} else if ref := addr.Spec.ParentRef; ref == nil || ref.Resource != "services" || ref.Namespace != ns || ref.Name != "a" {
		t.Errorf("IPAddress 10.96.16.1's parent: %+v, want services stored/a", ref)
	}

	again := []v1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.16.3"}}, svcs[0]}
	if err := cp.StoreServices(ctx, ns, again); err == nil {
		t.Error("storing service a a second time succeeded")
	}
	// 10.104.0.1 is in the default range, not in the one the later flag set.
	bad := []v1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: v1.ServiceSpec{ClusterIP: "10.104.0.1"}}}
	if err := cp.StoreServices(ctx, ns, bad); err == nil || !strings.Contains(err.Error(), "stored/d: spec.clusterIP") {
		t.Errorf("a cluster IP outside 10.96.0.0/16: error %v, want one naming stored/d's spec.clusterIP", err)
	}
	if _, err := client.CoreV1().Services(ns).Get(ctx, "c", metav1.GetOptions{}); err == nil {
		t.Error("service c stored although its batch failed")
	}

	if err := cp.DeleteStored(ctx, "services", ns); err != nil {
		t.Fatal(err)
	}
	if err := cp.DeleteStored(ctx, "pods", ns); err == nil {
		t.Error("DeleteStored of pods: no error, want one naming what it deletes")
	}
	if err := wait(ctx, func() bool {
		list, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	}); err != nil {
		t.Errorf("services left after DeleteStored: %v", err)
	}
}

func wait(ctx context.Context, done func() bool) error {
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
