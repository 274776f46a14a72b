package watcher

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders of API objects and model values for tests: a base object and
// functions that change it.

func service(changes ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, c := range changes {
		c(s)
	}
	return s
}

func endpointSlice(name string, changes ...func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)},
	}
	for _, c := range changes {
		c(s)
	}
	return s
}

func slicePortOf(name string, proto v1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
}

func withEndpoints(eps ...discoveryv1.Endpoint) func(*discoveryv1.EndpointSlice) {
	return func(s *discoveryv1.EndpointSlice) { s.Endpoints = append(s.Endpoints, eps...) }
}

// apiEndpoint is a ready endpoint on node-b.
func apiEndpoint(addr string, changes ...func(*discoveryv1.Endpoint)) discoveryv1.Endpoint {
	node := "node-b"
	e := discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
	for _, c := range changes {
		c(&e)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

func servicePort(changes ...func(*model.ServicePort)) model.ServicePort {
	p := model.ServicePort{
		Name:       model.ServicePortName{Namespace: "default", Name: "web", Port: "http"},
		Protocol:   inet.TCP,
		Port:       80,
		ClusterIPs: addrs("10.96.0.10"),
	}
	for _, c := range changes {
		c(&p)
	}
	return p
}

// modelEndpoint is a ready, serving endpoint on node-b.
func modelEndpoint(addr string, port uint16) model.Endpoint {
	return model.Endpoint{Addr: netip.MustParseAddr(addr), Port: port, Ready: true, Serving: true, NodeName: "node-b"}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// cmpOpts compares the model's netip values.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// checkValid fails the test if the dataplane would reject a converted
// port: conversion must never produce one.
func checkValid(t *testing.T, ports []model.ServicePort) {
	t.Helper()
	for i := range ports {
		if err := ports[i].Validate(); err != nil {
			t.Errorf("converted port rejected by the dataplane: %v", err)
		}
	}
}
