package watcher

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestServicePorts(t *testing.T) {
	ep := modelEndpoint
	tests := []struct {
		name   string
		svc    *v1.Service
		slices []*discoveryv1.EndpointSlice
		want   []model.ServicePort
		// errFields are the fields the errors name, in order.
		errFields []string
	}{{
		name: "ClusterIP",
		svc:  service(),
		slices: []*discoveryv1.EndpointSlice{endpointSlice("web-1", withEndpoints(
			apiEndpoint("10.244.2.7"), apiEndpoint("10.244.1.5")))},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Endpoints = []model.Endpoint{ep("10.244.1.5", 8080), ep("10.244.2.7", 8080)}
		})},
	}, {
		name: "no endpoints",
		svc:  service(),
		want: []model.ServicePort{servicePort()},
	}, {
		name: "single unnamed port, clusterIP without clusterIPs, default protocol",
		svc: service(func(s *v1.Service) {
			s.Spec.ClusterIPs = nil
			s.Spec.Ports = []v1.ServicePort{{Port: 53}}
		}),
		slices: []*discoveryv1.EndpointSlice{endpointSlice("web-1", func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr(int32(5353))}}
		}, withEndpoints(apiEndpoint("10.244.1.5")))},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Name.Port, p.Port = "", 53
			p.Endpoints = []model.Endpoint{ep("10.244.1.5", 5353)}
		})},
	}, {
		name: "NodePort with externalTrafficPolicy Local",
		svc: service(func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000 // only for load balancers
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.NodePort, p.ExternalPolicy = 30080, model.PolicyLocal
		})},
	}, {
		name: "LoadBalancer with source ranges, Local policy and health check",
		svc: service(func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.LoadBalancerSourceRanges = []string{" 10.0.0.0/8", "192.168.1.1/24", "2001:db8::/32"}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.9"}}
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.NodePort, p.ExternalPolicy, p.HealthCheckNodePort = 30080, model.PolicyLocal, 32000
			p.LoadBalancerIPs = addrs("198.51.100.9")
			p.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.0/24")}
		})},
	}, {
		name: "LoadBalancer ingress: ipMode Proxy and hostname-only left out",
		svc: service(func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
				{IP: "198.51.100.1", IPMode: ptr(v1.LoadBalancerIPModeProxy)},
				{Hostname: "lb.example.com"},
				{IP: "198.51.100.2", IPMode: ptr(v1.LoadBalancerIPModeVIP)},
				{IP: "198.51.100.3"},
			}
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.LoadBalancerIPs = addrs("198.51.100.2", "198.51.100.3")
		})},
	}, {
		name: "ExternalIPs make a ClusterIP service externally accessible",
		svc: service(func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.7", "2001:db8::7"}
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.ExternalIPs, p.ExternalPolicy = addrs("203.0.113.7"), model.PolicyLocal
		})},
	}, {
		name: "externalTrafficPolicy Local ignored without external access",
		svc: service(func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}),
		want: []model.ServicePort{servicePort()},
	}, {
		name: "internalTrafficPolicy Local",
		svc: service(func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicyLocal)
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) { p.InternalPolicy = model.PolicyLocal })},
	}, {
		name: "ClientIP affinity with the default timeout",
		svc:  service(func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) { p.SessionAffinity = 10800 * time.Second })},
	}, {
		name: "ClientIP affinity with a timeout",
		svc: service(func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
		}),
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) { p.SessionAffinity = time.Minute })},
	}, {
		name: "endpoint conditions and their defaults",
		svc:  service(),
		slices: []*discoveryv1.EndpointSlice{endpointSlice("web-1", withEndpoints(
			apiEndpoint("10.244.1.1", func(e *discoveryv1.Endpoint) { e.Conditions = discoveryv1.EndpointConditions{} }),
			apiEndpoint("10.244.1.2", func(e *discoveryv1.Endpoint) {
				e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
			}),
			apiEndpoint("10.244.1.3", func(e *discoveryv1.Endpoint) {
				e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false)}
			}),
			apiEndpoint("10.244.1.4", func(e *discoveryv1.Endpoint) {
				e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}
			}),
		))},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Endpoints = []model.Endpoint{
				ep("10.244.1.1", 8080),
				{Addr: netip.MustParseAddr("10.244.1.2"), Port: 8080, Serving: true, Terminating: true, NodeName: "node-b"},
				// kube-proxy reads a nil serving as true, whatever ready says.
				{Addr: netip.MustParseAddr("10.244.1.3"), Port: 8080, Serving: true, NodeName: "node-b"},
				{Addr: netip.MustParseAddr("10.244.1.4"), Port: 8080, Terminating: true, NodeName: "node-b"},
			}
		})},
	}, {
		name: "node, zone, zone hints and node hints",
		svc:  service(),
		slices: []*discoveryv1.EndpointSlice{endpointSlice("web-1", withEndpoints(
			apiEndpoint("10.244.1.1", func(e *discoveryv1.Endpoint) {
				e.NodeName, e.Zone = ptr("node-a"), ptr("zone-a")
				e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}, {Name: "zone-c"}}}
			}),
			apiEndpoint("10.244.1.2", func(e *discoveryv1.Endpoint) {
				e.NodeName, e.Zone = ptr("node-b"), ptr("zone-a")
				e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-b"}}}
			}),
			apiEndpoint("10.244.1.3", func(e *discoveryv1.Endpoint) { e.Hints = &discoveryv1.EndpointHints{} }),
		))},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Endpoints = []model.Endpoint{{Addr: netip.MustParseAddr("10.244.1.1"), Port: 8080, Ready: true, Serving: true,
				NodeName: "node-a", Zone: "zone-a", Hints: &model.Hints{ForZones: []string{"zone-a", "zone-c"}}},
				{Addr: netip.MustParseAddr("10.244.1.2"), Port: 8080, Ready: true, Serving: true,
					NodeName: "node-b", Zone: "zone-a", Hints: &model.Hints{ForZones: []string{"zone-a"}, ForNodes: []string{"node-b"}}},
				{Addr: netip.MustParseAddr("10.244.1.3"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"}}
		})},
	}, {
		name: "dual-stack",
		svc: service(func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
			s.Spec.ExternalIPs = []string{"2001:db8::7", "203.0.113.7"}
		}),
		slices: []*discoveryv1.EndpointSlice{
			endpointSlice("web-v4", withEndpoints(apiEndpoint("10.244.1.5"))),
			endpointSlice("web-v6", func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 },
				withEndpoints(apiEndpoint("fd00:10:244::5"))),
		},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.ClusterIPs = addrs("10.96.0.10", "fd00:10:96::a")
			p.ExternalIPs = addrs("2001:db8::7", "203.0.113.7")
			p.Endpoints = []model.Endpoint{ep("10.244.1.5", 8080), ep("fd00:10:244::5", 8080)}
		})},
	}, {
		name: "IPv6 single-stack leaves IPv4 endpoints out",
		svc:  service(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"fd00:10:96::a"} }),
		slices: []*discoveryv1.EndpointSlice{
			endpointSlice("web-v4", withEndpoints(apiEndpoint("10.244.1.5"))),
			endpointSlice("web-v6", func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 },
				withEndpoints(apiEndpoint("fd00:10:244::5"))),
		},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.ClusterIPs = addrs("fd00:10:96::a")
			p.Endpoints = []model.Endpoint{ep("fd00:10:244::5", 8080)}
		})},
	}, {
		name: "ports matched by name and protocol: SCTP, UDP and TCP",
		svc: service(func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP},
				{Name: "sig", Port: 3868, Protocol: v1.ProtocolSCTP},
			}
		}),
		slices: []*discoveryv1.EndpointSlice{endpointSlice("web-1", func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{
				slicePortOf("dns", v1.ProtocolUDP, 5353),
				slicePortOf("dns", v1.ProtocolTCP, 5300), // wrong protocol for "dns"
				slicePortOf("dns-tcp", v1.ProtocolTCP, 5354),
				slicePortOf("sig", v1.ProtocolSCTP, 3869),
				{Name: ptr("dns")}, // no port: all ports, not programmable
			}
		}, withEndpoints(apiEndpoint("10.244.1.5")))},
		want: []model.ServicePort{
			servicePort(func(p *model.ServicePort) {
				p.Name.Port, p.Protocol, p.Port = "dns", inet.UDP, 53
				p.Endpoints = []model.Endpoint{ep("10.244.1.5", 5353)}
			}),
			servicePort(func(p *model.ServicePort) {
				p.Name.Port, p.Protocol, p.Port = "dns-tcp", inet.TCP, 53
				p.Endpoints = []model.Endpoint{ep("10.244.1.5", 5354)}
			}),
			servicePort(func(p *model.ServicePort) {
				p.Name.Port, p.Protocol, p.Port = "sig", inet.SCTP, 3868
				p.Endpoints = []model.Endpoint{ep("10.244.1.5", 3869)}
			}),
		},
	}, {
		// Issue 15 §1.15: as kube-proxy's EndpointSliceCache, a later copy
		// replaces an earlier one unless it is terminating.
		name: "slices merged, an endpoint listed twice taken once",
		svc:  service(),
		slices: []*discoveryv1.EndpointSlice{
			endpointSlice("web-b", withEndpoints(
				apiEndpoint("10.244.1.3", func(e *discoveryv1.Endpoint) {
					e.NodeName, e.Conditions = ptr("node-a"), discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
				}),
			)),
			endpointSlice("web-a", withEndpoints(
				apiEndpoint("10.244.1.1", func(e *discoveryv1.Endpoint) { e.NodeName = ptr("node-a") }),
				apiEndpoint("10.244.1.1", func(e *discoveryv1.Endpoint) { e.Conditions.Ready = ptr(false) }),
				apiEndpoint("10.244.1.2"),
				apiEndpoint("10.244.1.2", func(e *discoveryv1.Endpoint) {
					e.NodeName, e.Conditions = ptr("node-a"), discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
				}),
				apiEndpoint("10.244.1.3"),
			)),
		},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Endpoints = []model.Endpoint{
				{Addr: netip.MustParseAddr("10.244.1.1"), Port: 8080, Serving: true, NodeName: "node-b"},
				ep("10.244.1.2", 8080), ep("10.244.1.3", 8080),
			}
		})},
	}, {
		name: "slices of other services, headless, unlabelled and FQDN ignored",
		svc:  service(),
		slices: []*discoveryv1.EndpointSlice{
			endpointSlice("other", func(s *discoveryv1.EndpointSlice) { s.Labels[LabelServiceName] = "other" },
				withEndpoints(apiEndpoint("10.244.9.1"))),
			endpointSlice("other-ns", func(s *discoveryv1.EndpointSlice) { s.Namespace = "kube-system" },
				withEndpoints(apiEndpoint("10.244.9.2"))),
			endpointSlice("headless", func(s *discoveryv1.EndpointSlice) { s.Labels[LabelHeadless] = "" },
				withEndpoints(apiEndpoint("10.244.9.3"))),
			endpointSlice("unlabelled", func(s *discoveryv1.EndpointSlice) { s.Labels = nil },
				withEndpoints(apiEndpoint("10.244.9.5"))),
			endpointSlice("fqdn", func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeFQDN },
				withEndpoints(apiEndpoint("backend.example.com"))),
		},
		want: []model.ServicePort{servicePort()},
	}, {
		name: "headless service",
		svc: service(func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
		}),
	}, {
		name: "service without a cluster IP",
		svc:  service(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil }),
	}, {
		name: "ExternalName service",
		svc: service(func(s *v1.Service) {
			s.Spec.Type, s.Spec.ExternalName = v1.ServiceTypeExternalName, "db.example.com"
		}),
	}, {
		name: "service labelled for another proxy",
		svc:  service(func(s *v1.Service) { s.Labels = map[string]string{LabelServiceProxyName: "cilium"} }),
	}, {
		// Issue 15 §1.16: kube-proxy filters Services by the proxy-name
		// label only and EndpointSlices by the headless label only.
		name: "the headless label on a service and the proxy-name label on a slice are not looked at",
		svc:  service(func(s *v1.Service) { s.Labels = map[string]string{LabelHeadless: ""} }),
		slices: []*discoveryv1.EndpointSlice{
			endpointSlice("proxied", func(s *discoveryv1.EndpointSlice) { s.Labels[LabelServiceProxyName] = "cilium" },
				withEndpoints(apiEndpoint("10.244.1.1"))),
		},
		want: []model.ServicePort{servicePort(func(p *model.ServicePort) {
			p.Endpoints = []model.Endpoint{ep("10.244.1.1", 8080)}
		})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ServicePorts(tt.svc, tt.slices)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("service ports (-want +got):\n%s", diff)
			}
			checkErrors(t, errs, tt.errFields)
			checkValid(t, got)
		})
	}
}

func TestServicePortsInvalid(t *testing.T) {
	goodSlice := endpointSlice("web-good", withEndpoints(apiEndpoint("10.244.1.1")))
	tests := []struct {
		name string
		svc  *v1.Service
		bad  *discoveryv1.EndpointSlice
		// kind and field the error names; an invalid service yields no
		// ports, an invalid slice leaves the good slice's endpoint.
		kind, field string
	}{
		{"port 0", service(func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "b", Port: 0})
		}), nil, "Service", "spec.ports[1].port"},
		{"port too big", service(func(s *v1.Service) { s.Spec.Ports[0].Port = 70000 }), nil, "Service", "spec.ports[0].port"},
		{"node port negative", service(func(s *v1.Service) { s.Spec.Ports[0].NodePort = -1 }), nil, "Service", "spec.ports[0].nodePort"},
		{"unknown protocol", service(func(s *v1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }), nil, "Service", "spec.ports[0].protocol"},
		{"duplicate port name", service(func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "http", Port: 81})
		}), nil, "Service", "spec.ports[1].name"},
		{"bad cluster IP", service(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "bogus"} }), nil, "Service", "spec.clusterIPs[1]"},
		{"bad legacy cluster IP", service(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0", nil }), nil, "Service", "spec.clusterIP"},
		{"loopback cluster IP", service(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"127.0.0.1"} }), nil, "Service", "spec.clusterIPs[0]"},
		{"two cluster IPs of one family", service(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "10.96.0.11"} }), nil, "Service", "spec.clusterIPs[1]"},
		{"affinity timeout 0", service(func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(0))}}
		}), nil, "Service", "spec.sessionAffinityConfig.clientIP.timeoutSeconds"},
		{"unknown affinity", service(func(s *v1.Service) { s.Spec.SessionAffinity = "Cookie" }), nil, "Service", "spec.sessionAffinity"},
		{"unknown type", service(func(s *v1.Service) { s.Spec.Type = "Ingress" }), nil, "Service", "spec.type"},
		{"unknown external policy", service(func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = "Nearby" }), nil, "Service", "spec.externalTrafficPolicy"},
		{"unknown internal policy", service(func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicy("Nearby")) }), nil, "Service", "spec.internalTrafficPolicy"},
		{"bad health check port", service(func(s *v1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal, 70000
		}), nil, "Service", "spec.healthCheckNodePort"},
		{"no name", service(func(s *v1.Service) { s.Name = "" }), nil, "Service", "metadata"},

		{"slice address type", service(), endpointSlice("web-bad", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = "IPX"
		}), "EndpointSlice", "addressType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slices := []*discoveryv1.EndpointSlice{goodSlice}
			if tt.bad != nil {
				slices = append(slices, tt.bad)
			}
			got, errs := ServicePorts(tt.svc, slices)
			checkErrors(t, errs, []string{tt.field})
			var ie *InvalidError
			if errors.As(errs[0], &ie) && (ie.Kind != tt.kind || ie.Namespace != "default") {
				t.Errorf("error names %s %s/%s, want %s in default", ie.Kind, ie.Namespace, ie.Name, tt.kind)
			}
			if tt.bad == nil && got != nil {
				t.Errorf("invalid service converted to %v", got)
			}
			if tt.bad != nil {
				want := []model.ServicePort{servicePort(func(p *model.ServicePort) {
					p.Endpoints = []model.Endpoint{modelEndpoint("10.244.1.1", 8080)}
				})}
				if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
					t.Errorf("other slices not kept (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// checkErrors checks that errs are InvalidErrors naming the fields.
func checkErrors(t *testing.T, errs []error, fields []string) {
	t.Helper()
	if len(errs) != len(fields) {
		t.Fatalf("errors %v, want %d naming %v", errs, len(fields), fields)
	}
	for i, err := range errs {
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("error %v is not an *InvalidError matching model.ErrInvalid", err)
			continue
		}
		if ie.Field != fields[i] {
			t.Errorf("error %q names field %q, want %q", err, ie.Field, fields[i])
		}
	}
}

func TestConvertNode(t *testing.T) {
	base := model.Node{Name: "node-a", Zone: "zone-x", Addresses: addrs("192.0.2.1"), Scheduler: "wrr"}
	node := func(changes ...func(*v1.Node)) *v1.Node {
		n := &v1.Node{}
		n.Name = "node-a"
		for _, c := range changes {
			c(n)
		}
		return n
	}
	tests := []struct {
		name  string
		node  *v1.Node
		want  model.Node
		field string
	}{
		{"nothing known keeps the base", node(), base, ""},
		{"addresses and zone", node(func(n *v1.Node) {
			n.Labels = map[string]string{v1.LabelTopologyZone: "zone-a"}
			n.Status.Addresses = []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "node-a"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
				{Type: v1.NodeInternalIP, Address: "fd00::5"},
				{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
				{Type: v1.NodeExternalIP, Address: "10.0.0.5"},
			}
		}), model.Node{Name: "node-a", Zone: "zone-a", Addresses: addrs("192.0.2.1"), NodeIPs: addrs("10.0.0.5", "fd00::5", "203.0.113.5"), Scheduler: "wrr"}, ""},
		// Some cloud controllers list the ExternalIPs first; kube-proxy's
		// GetNodeHostIPs puts the InternalIPs first all the same.
		{"external listed first, both families", node(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{
				{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
				{Type: v1.NodeExternalIP, Address: "2001:db8::5"},
				{Type: v1.NodeHostName, Address: "node-a"},
				{Type: v1.NodeInternalIP, Address: "fd00::5"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
			}
		}), model.Node{Name: "node-a", Zone: "zone-x", Addresses: addrs("192.0.2.1"), NodeIPs: addrs("fd00::5", "10.0.0.5", "203.0.113.5", "2001:db8::5"), Scheduler: "wrr"}, ""},
		{"leading zeros", node(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "010.000.000.005"}}
		}), model.Node{Name: "node-a", Zone: "zone-x", Addresses: addrs("192.0.2.1"), NodeIPs: addrs("10.0.0.5"), Scheduler: "wrr"}, ""},
		{"bad address", node(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0"}}
		}), base, "status.addresses[0].address"},
		{"bad address left out alone", node(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0"}, {Type: v1.NodeExternalIP, Address: "203.0.113.5"}}
		}), model.Node{Name: "node-a", Zone: "zone-x", Addresses: addrs("192.0.2.1"), NodeIPs: addrs("203.0.113.5"), Scheduler: "wrr"}, "status.addresses[0].address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConvertNode(base, tt.node)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			var fields []string
			if tt.field != "" {
				fields = []string{tt.field}
			}
			var errs []error
			if err != nil {
				errs = []error{err}
			}
			checkErrors(t, errs, fields)
		})
	}
}

// The endpoints of a slice with the same hints share one copy of them.
func TestSliceEndpointsShareHints(t *testing.T) {
	hinted := func(e *discoveryv1.Endpoint) {
		e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
	}
	info, err := convertSlice(endpointSlice("web-1", withEndpoints(apiEndpoint("10.244.1.1", hinted), apiEndpoint("10.244.1.2", hinted))))
	if err != nil {
		t.Fatal(err)
	}
	if h := info.endpoints[0].Hints; h == nil || h != info.endpoints[1].Hints {
		t.Errorf("hints %p and %p, want one shared copy", h, info.endpoints[1].Hints)
	}
}

// A bad external or load-balancer address is left out alone, as kube-proxy
// drops it: the service keeps its cluster IP, its ports and its good
// addresses, and the error names the bad one's field.
func TestServicePortsLeavesOutBadAddresses(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(*v1.Service)
		fields      []string
		externalIPs []string
		lbIPs       []string
	}{
		{"bad external IP", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113", "203.0.113.7"} },
			[]string{"spec.externalIPs[0]"}, []string{"203.0.113.7"}, nil},
		{"multicast and loopback external IPs", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"224.0.0.1", "127.0.0.1", "0.0.0.0"} },
			[]string{"spec.externalIPs[0]", "spec.externalIPs[1]", "spec.externalIPs[2]"}, nil, nil},
		{"bad ingress IP", func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.1"}, {IP: "x"}}
		}, []string{"status.loadBalancer.ingress[1].ip"}, nil, []string{"198.51.100.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ServicePorts(service(tt.edit), []*discoveryv1.EndpointSlice{endpointSlice("web-good", withEndpoints(apiEndpoint("10.244.1.1")))})
			checkErrors(t, errs, tt.fields)
			if len(got) != 1 {
				t.Fatalf("the service was not programmed: %v", got)
			}
			p := got[0]
			if len(p.ClusterIPs) != 1 || len(p.Endpoints) == 0 {
				t.Errorf("the service lost its cluster IP or endpoints: %+v", p)
			}
			if fmt.Sprint(p.ExternalIPs) != fmt.Sprint(addrs(tt.externalIPs...)) || fmt.Sprint(p.LoadBalancerIPs) != fmt.Sprint(addrs(tt.lbIPs...)) {
				t.Errorf("addresses kept: external %v, load balancer %v; want %v, %v", p.ExternalIPs, p.LoadBalancerIPs, tt.externalIPs, tt.lbIPs)
			}
		})
	}
}

// kube-proxy parses addresses and ranges with ParseIPSloppy and
// ParseCIDRSloppy, which read an IPv4 part with leading zeros as decimal:
// such a Service and slice are programmed, not dropped.
func TestServicePortsLeadingZeros(t *testing.T) {
	svc := service(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIPs = []string{"010.096.000.010"}
		s.Spec.ExternalIPs = []string{"203.000.113.007"}
		s.Spec.LoadBalancerSourceRanges = []string{"010.0.0.0/8", " 192.168.001.000/24 "}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.051.100.001"}}
	})
	slice := endpointSlice("web-1", withEndpoints(apiEndpoint("010.244.001.002"), apiEndpoint("10.244.1.3")))
	got, errs := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice})
	checkErrors(t, errs, nil)
	want := []model.ServicePort{servicePort(func(p *model.ServicePort) {
		p.ExternalIPs = addrs("203.0.113.7")
		p.LoadBalancerIPs = addrs("198.51.100.1")
		p.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.0/24")}
		p.Endpoints = []model.Endpoint{modelEndpoint("10.244.1.2", 8080), modelEndpoint("10.244.1.3", 8080)}
	})}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("service ports (-want +got):\n%s", diff)
	}
	checkValid(t, got)
}

// One bad entry is left out alone, as kube-proxy reads entries one by
// one: the rest of the Service and of the slice is programmed, and each
// error names the object and the entry's field.
func TestServicePortsLeavesOutBadEntries(t *testing.T) {
	svc := service(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "", "bogus", "192.168.0.0/16", "10.0.0.0"}
	})
	slice := endpointSlice("web-1", func(s *discoveryv1.EndpointSlice) {
		s.Ports = append(s.Ports, slicePortOf("x", v1.ProtocolTCP, 70000), slicePortOf("y", "ICMP", 9090))
	}, withEndpoints(
		apiEndpoint("10.244.1.1"),
		apiEndpoint("10.244.1.999"),
		discoveryv1.Endpoint{},
		apiEndpoint("fd00::1"),
		apiEndpoint("239.1.1.1"),
		apiEndpoint("0.0.0.0"),
		apiEndpoint("10.244.1.2"),
	))
	got, errs := ServicePorts(svc, []*discoveryv1.EndpointSlice{slice})
	checkErrors(t, errs, []string{
		"spec.loadBalancerSourceRanges[2]", "spec.loadBalancerSourceRanges[4]",
		"ports[1].port", "ports[2].protocol",
		"endpoints[1].addresses[0]", "endpoints[2].addresses", "endpoints[3].addresses[0]",
		"endpoints[4].addresses[0]", "endpoints[5].addresses[0]",
	})
	for _, err := range errs {
		var ie *InvalidError
		if errors.As(err, &ie) && (!ie.Entry || ie.Namespace != "default" || ie.Name == "") {
			t.Errorf("error %v: entry %v, object %s/%s; want an entry of a named object", err, ie.Entry, ie.Namespace, ie.Name)
		}
	}
	want := []model.ServicePort{servicePort(func(p *model.ServicePort) {
		p.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
		p.Endpoints = []model.Endpoint{modelEndpoint("10.244.1.1", 8080), modelEndpoint("10.244.1.2", 8080)}
	})}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("service ports (-want +got):\n%s", diff)
	}
	checkValid(t, got)
}

// A Node that lists its ExternalIPs before its InternalIPs: node ports
// with nodePortAddresses [primary] and the node's own allowance in a load
// balancer's source ranges use the InternalIP of each family, as
// kube-proxy's primary node IPs are.
func TestNodePrimaryIPsInternalFirst(t *testing.T) {
	n := &v1.Node{}
	n.Name = "node-a"
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
		{Type: v1.NodeExternalIP, Address: "2001:db8::5"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: v1.NodeInternalIP, Address: "fd00::5"},
	}
	// The external addresses are on the node too, as on a bare-metal node
	// with a public interface.
	base := model.Node{Name: "node-a", Addresses: addrs("203.0.113.5", "2001:db8::5", "10.0.0.5", "fd00::5"), NodePortPrimary: true}
	node, err := ConvertNode(base, n)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(plan.HealthCheckAddresses(&node)), fmt.Sprint(addrs("10.0.0.5", "fd00::5")); got != want {
		t.Errorf("node-port (health-check) addresses %s, want %s", got, want)
	}
	// Source ranges that hold the internal addresses, not the external:
	// the node's own traffic to the load balancer is let through.
	svc := servicePort(func(p *model.ServicePort) {
		p.ClusterIPs = addrs("10.96.0.10", "fd00:96::10")
		p.LoadBalancerIPs = addrs("198.51.100.1", "2001:db8:1b::1")
		p.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}
	})
	d := plan.Build(&model.State{Node: node, Services: []model.ServicePort{svc}}, func(*model.Node) string { return "" })
	for _, f := range inet.Families() {
		if n := len(d.Kernel.Entries[model.SetName(model.SetLoadBalancerSourceIP, f)]); n != 1 {
			t.Errorf("%v: %d entries letting the node reach its load balancer, want 1", f, n)
		}
	}
}
