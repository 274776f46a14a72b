package watcher

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	v1 "k8s.io/api/core/v1"
)

// Labels that keep kube-proxy away from an object, each read where
// kube-proxy's informers read it (cmd/kube-proxy/app/server.go).
const (
	// LabelServiceProxyName marks services that another proxy handles;
	// they are skipped. Only Services are filtered by it: a slice carrying
	// it is still read, though it usually joins no service.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// LabelHeadless marks the EndpointSlices of headless services; they
	// are skipped. Only EndpointSlices are filtered by it: a Service
	// carrying it with a cluster IP is programmed.
	LabelHeadless = v1.IsHeadlessService
)

// defaultAffinity is the API's default ClientIP affinity timeout.
const defaultAffinity = 10800 * time.Second

// maxAffinitySeconds is the longest ClientIP affinity the API allows.
const maxAffinitySeconds = 86400

// convertService returns the service's ports without endpoints, or nil for
// a service kube-proxy does not handle (headless, ExternalName, another
// proxy's). An error with ports says which addresses were left out; an
// error without them, why the service was.
func convertService(svc *v1.Service) ([]dataplane.ServicePort, error) {
	if _, other := svc.Labels[LabelServiceProxyName]; other || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil, nil
	}
	fail := objectError("Service", svc.Namespace, svc.Name)
	if svc.Namespace == "" || svc.Name == "" {
		return nil, fail("metadata", "namespace and name must be set")
	}
	ips := svc.Spec.ClusterIPs
	ipField := func(i int) string { return fmt.Sprintf("spec.clusterIPs[%d]", i) }
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
		ipField = func(int) string { return "spec.clusterIP" }
	}
	if ips[0] == "" || ips[0] == v1.ClusterIPNone {
		return nil, nil
	}
	var clusterIPs []netip.Addr
	for i, s := range ips {
		ip, err := parseServiceAddr(s)
		if err != nil {
			return nil, fail(ipField(i), "%v", err)
		}
		if slices.ContainsFunc(clusterIPs, func(a netip.Addr) bool { return a.Is4() == ip.Is4() }) {
			return nil, fail(ipField(i), "%s: a second cluster IP of the same family", ip)
		}
		clusterIPs = append(clusterIPs, ip)
	}
	// Like kube-proxy's per-family proxiers, addresses of a family the
	// service has no cluster IP of are left out.
	served := func(ip netip.Addr) bool {
		return slices.ContainsFunc(clusterIPs, func(a netip.Addr) bool { return a.Is4() == ip.Is4() })
	}

	// A bad external or load-balancer address is left out alone, as
	// kube-proxy drops it: the rest of the service is still programmed,
	// and the error names the address.
	var leftOut []error
	var externalIPs []netip.Addr
	for i, s := range svc.Spec.ExternalIPs {
		ip, err := parseServiceAddr(s)
		if err != nil {
			leftOut = append(leftOut, fail(fmt.Sprintf("spec.externalIPs[%d]", i), "%v; the address is left out", err))
			continue
		}
		if served(ip) {
			externalIPs = append(externalIPs, ip)
		}
	}
	var lbIPs []netip.Addr
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		// A hostname-only ingress has nothing to program, and an ipMode
		// Proxy one is reached through the load balancer's own proxy, not
		// with the VIP as destination.
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy) {
			continue
		}
		ip, err := parseServiceAddr(ing.IP)
		if err != nil {
			leftOut = append(leftOut, fail(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), "%v; the address is left out", err))
			continue
		}
		if served(ip) {
			lbIPs = append(lbIPs, ip)
		}
	}
	var ranges []netip.Prefix
	for i, s := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fail(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), "%q is not a CIDR", s)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
		if served(p.Addr()) {
			ranges = append(ranges, p)
		}
	}

	var affinity time.Duration
	switch svc.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
	case v1.ServiceAffinityClientIP:
		affinity = defaultAffinity
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			secs := *c.ClientIP.TimeoutSeconds
			if secs < 1 || secs > maxAffinitySeconds {
				return nil, fail("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "%d is not from 1 to %d", secs, maxAffinitySeconds)
			}
			affinity = time.Duration(secs) * time.Second
		}
	default:
		return nil, fail("spec.sessionAffinity", "unknown affinity %q (want None or ClientIP)", svc.Spec.SessionAffinity)
	}

	var accessible bool
	switch svc.Spec.Type {
	case "", v1.ServiceTypeClusterIP:
		accessible = len(svc.Spec.ExternalIPs) > 0
	case v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
		accessible = true
	default:
		return nil, fail("spec.type", "unknown service type %q", svc.Spec.Type)
	}
	external := dataplane.PolicyCluster
	switch svc.Spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster:
	case v1.ServiceExternalTrafficPolicyLocal:
		// The policy means nothing for a service no one reaches from
		// outside; kube-proxy ignores it there.
		if accessible {
			external = dataplane.PolicyLocal
		}
	default:
		return nil, fail("spec.externalTrafficPolicy", "unknown policy %q (want Cluster or Local)", svc.Spec.ExternalTrafficPolicy)
	}
	internal := dataplane.PolicyCluster
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		switch *p {
		case v1.ServiceInternalTrafficPolicyCluster:
		case v1.ServiceInternalTrafficPolicyLocal:
			internal = dataplane.PolicyLocal
		default:
			return nil, fail("spec.internalTrafficPolicy", "unknown policy %q (want Cluster or Local)", *p)
		}
	}
	var healthCheck uint16
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer && external == dataplane.PolicyLocal {
		hc := svc.Spec.HealthCheckNodePort
		if hc < 0 || hc > 65535 {
			return nil, fail("spec.healthCheckNodePort", "%d is not a port", hc)
		}
		healthCheck = uint16(hc)
	}

	tune := readTuning(svc.Annotations)
	ports := make([]dataplane.ServicePort, 0, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto, err := protocol(p.Protocol)
		if err != nil {
			return nil, fail(field+".protocol", "%v", err)
		}
		if p.Port < 1 || p.Port > 65535 {
			return nil, fail(field+".port", "%d is not from 1 to 65535", p.Port)
		}
		if p.NodePort < 0 || p.NodePort > 65535 {
			return nil, fail(field+".nodePort", "%d is not from 0 to 65535", p.NodePort)
		}
		if slices.ContainsFunc(ports, func(sp dataplane.ServicePort) bool { return sp.Name.Port == p.Name }) {
			return nil, fail(field+".name", "%q names two ports", p.Name)
		}
		ports = append(ports, dataplane.ServicePort{
			Name:                     dataplane.ServicePortName{Namespace: svc.Namespace, Name: svc.Name, Port: p.Name},
			Protocol:                 proto,
			Port:                     uint16(p.Port),
			ClusterIPs:               clusterIPs,
			NodePort:                 uint16(p.NodePort),
			ExternalIPs:              externalIPs,
			LoadBalancerIPs:          lbIPs,
			LoadBalancerSourceRanges: ranges,
			SessionAffinity:          affinity,
			ExternalPolicy:           external,
			InternalPolicy:           internal,
			HealthCheckNodePort:      healthCheck,
			Scheduler:                tune.scheduler,
			SchedulerFlags:           tune.flags,
			DrainTimeout:             tune.drain,
			BadSettings:              tune.bad,
		})
	}
	return ports, errors.Join(leftOut...)
}

// protocol converts an API protocol; empty is the API's default, TCP.
func protocol(p v1.Protocol) (dataplane.Protocol, error) {
	switch p {
	case "", v1.ProtocolTCP:
		return dataplane.TCP, nil
	case v1.ProtocolUDP:
		return dataplane.UDP, nil
	case v1.ProtocolSCTP:
		return dataplane.SCTP, nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want TCP, UDP or SCTP)", p)
}

// parseServiceAddr parses an address a service is reached on.
func parseServiceAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	ip = ip.Unmap()
	if ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("%s is not a usable unicast address", ip)
	}
	return ip, nil
}
