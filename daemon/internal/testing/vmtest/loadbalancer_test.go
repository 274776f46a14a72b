package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// The load balancer gives a Service of type LoadBalancer an address per
// family, the finalizer and a route to every Ready node (Cluster) or to
// the nodes whose health-check node port answers 200 (Local; a node
// goes after two failed checks in a row), to one of them for ClientIP
// session affinity; a Service it does not serve keeps what it has; one
// that stops being of type LoadBalancer loses its address, route and
// finalizer.
func TestLoadBalancer(t *testing.T) {
	ctx := context.Background()
	// The first node's health check passes; the second's port is closed.
	hc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer hc.Close()
	vms := loopbackVMs()
	cluster := lbService("cluster", corev1.IPv4Protocol, corev1.IPv6Protocol)
	local := localLBService("local", portOf(t, hc.Listener.Addr()))
	affinity := lbService("affinity", corev1.IPv4Protocol)
	affinity.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	classed := lbService("classed", corev1.IPv4Protocol)
	classed.Spec.LoadBalancerClass = ptr.To("example.com/other")
	clusterIP := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "clusterip"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	client := fake.NewClientset(readyNode("kubenode"), readyNode("kubenode2"), cluster, local, affinity, classed, clusterIP)

	lb := newLoadBalancer(client, vms)
	var routes []string
	lb.setRoute = func(op string, a netip.Addr, hops []netip.Addr) error {
		routes = append(routes, fmt.Sprintf("%s %s %v", op, a, hops))
		return nil
	}
	if err := lb.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"affinity": {"192.0.2.129"}, "cluster": {"192.0.2.130", "2001:db8::8001"}, "local": {"192.0.2.131"}, "classed": nil, "clusterip": nil}
	for name, addrs := range want {
		svc, err := client.CoreV1().Services("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			got = append(got, in.IP)
		}
		slices.Sort(got)
		if !slices.Equal(got, addrs) {
			t.Errorf("service %s's load balancer addresses %v, want %v", name, got, addrs)
		}
		if has := slices.Contains(svc.Finalizers, loadBalancerFinalizer); has != (addrs != nil) {
			t.Errorf("service %s has the finalizer: %v, want %v", name, has, addrs != nil)
		}
	}
	slices.Sort(routes)
	wantRoutes := []string{
		"replace 192.0.2.129 [127.0.0.1]",
		"replace 192.0.2.130 [127.0.0.1 127.0.0.2]",
		"replace 192.0.2.131 [127.0.0.1 127.0.0.2]",
		"replace 2001:db8::8001 [fd00:10:2::15 fd00:10:2::16]",
	}
	if !slices.Equal(routes, wantRoutes) {
		t.Errorf("routes %q, want %q", routes, wantRoutes)
	}

	// The second node fails its second health check in a row and goes;
	// a third round changes nothing. Then the Cluster one becomes a
	// ClusterIP Service.
	routes = nil
	if err := lb.reconcile(ctx); err != nil || !slices.Equal(routes, []string{"replace 192.0.2.131 [127.0.0.1]"}) {
		t.Fatalf("a second round: %v, routes %q", err, routes)
	}
	routes = nil
	if err := lb.reconcile(ctx); err != nil || routes != nil {
		t.Fatalf("a third round: %v, routes %q", err, routes)
	}
	svc, err := client.CoreV1().Services("ns").Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := lb.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)
	if want := []string{"del 192.0.2.130 []", "del 2001:db8::8001 []"}; !slices.Equal(routes, want) {
		t.Errorf("routes %q, want %q", routes, want)
	}
	if svc, err = client.CoreV1().Services("ns").Get(ctx, "cluster", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(svc.Status.LoadBalancer.Ingress) != 0 || slices.Contains(svc.Finalizers, loadBalancerFinalizer) {
		t.Errorf("a ClusterIP service kept its load balancer: %v, finalizers %v", svc.Status.LoadBalancer.Ingress, svc.Finalizers)
	}
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// A Local Service whose health checks fail on every node keeps its
// traffic on all of them, as a cloud's load balancer fails open, rather
// than losing its route.
func TestLoadBalancerFailsOpen(t *testing.T) {
	ctx := context.Background()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	svc := localLBService("local", portOf(t, closed.Addr()))
	lb := newLoadBalancer(fake.NewClientset(readyNode("kubenode"), readyNode("kubenode2"), svc), loopbackVMs())
	lb.setRoute = func(string, netip.Addr, []netip.Addr) error { return nil }
	for range unhealthyAfter + 1 {
		if err := lb.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	key := healthKey{types.NamespacedName{Namespace: "ns", Name: "local"}, "kubenode"}
	if got := lb.routed[netip.MustParseAddr("192.0.2.129")]; len(got) != 2 || lb.failures[key] < unhealthyAfter {
		t.Errorf("after %d failed checks: routed via %v, want both nodes", lb.failures[key], got)
	}
}

// loopbackVMs are two nodes whose IPv4 addresses are on loopback, where
// the tests serve (or do not serve) their health checks.
func loopbackVMs() []*nodeVM {
	return []*nodeVM{
		{name: "kubenode", ip: netip.MustParseAddr("127.0.0.1"), ip6: netip.MustParseAddr("fd00:10:2::15")},
		{name: "kubenode2", ip: netip.MustParseAddr("127.0.0.2"), ip6: netip.MustParseAddr("fd00:10:2::16")},
	}
}

// lbService is a Service of type LoadBalancer in namespace ns.
func lbService(name string, families ...corev1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: families, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster},
	}
}

// localLBService is an IPv4 one with externalTrafficPolicy Local and the
// health-check node port.
func localLBService(name string, healthCheckPort int32) *corev1.Service {
	svc := lbService(name, corev1.IPv4Protocol)
	svc.Spec.ExternalTrafficPolicy, svc.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, healthCheckPort
	return svc
}

// portOf is a TCP listener's port.
func portOf(t *testing.T, addr net.Addr) int32 {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	return int32(ap.Port())
}
