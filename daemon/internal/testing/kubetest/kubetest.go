// Package kubetest builds the Services and EndpointSlices that the
// daemon's tests write to a real API server (daemon/watcher's host tests,
// daemon/e2e's VM tests), and writes them: one shape, port "http" over
// TCP to 8080 on ready endpoints, so that the tests of the watcher and the
// tests end to end describe a service alike. WebManifest is a Service and
// its EndpointSlice as manifests, for the unit tests that feed the
// daemon's parts (daemon/cmd/ipvsplane, daemon/internal/proxier).
package kubetest

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Service is Service name in namespace ns, of type typ (empty leaves the
// API server's default, ClusterIP), with one TCP port named "http" from
// port to target port 8080.
func Service(ns, name string, typ corev1.ServiceType, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(8080),
		}}},
	}
}

// Slice is EndpointSlice name of service svc in namespace ns: IPv4, its
// port named "http" like the Services' over TCP on port, with a ready
// endpoint at each of addrs.
func Slice(ns, svc, name string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	portName, proto, ready := "http", corev1.ProtocolTCP, true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

// Triggered stamps s with the trigger-time annotation, now, as the
// EndpointSlice controller does on each change (a test control plane runs
// none), so that a proxy can report its network programming latency; it
// returns s.
func Triggered(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().Format(time.RFC3339Nano)
	return s
}

// PutSlice creates s, or replaces the EndpointSlice of its name if there
// is one.
func PutSlice(ctx context.Context, client kubernetes.Interface, s *discoveryv1.EndpointSlice) error {
	api := client.DiscoveryV1().EndpointSlices(s.Namespace)
	old, err := api.Get(ctx, s.Name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, s, metav1.CreateOptions{})
	}
	return err
}

// UpdateService reads Service name in namespace ns, changes it with
// change and writes it back.
func UpdateService(ctx context.Context, client kubernetes.Interface, ns, name string, change func(*corev1.Service)) error {
	api := client.CoreV1().Services(ns)
	svc, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(svc)
	_, err = api.Update(ctx, svc, metav1.UpdateOptions{})
	return err
}

// WebManifest is Service demo/web, a LoadBalancer of cluster IP
// 10.96.0.80 with node port 30080, externalTrafficPolicy Local and
// health-check node port 32000, and its EndpointSlice of one endpoint,
// 10.244.1.10 on node-a.
const WebManifest = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  clusterIP: 10.96.0.80
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [10.244.1.10], nodeName: node-a}
`
