package watcher

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/sloppy"
	"github.com/ipvsplane/ipvsplane/inet"
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
func convertService(svc *v1.Service) ([]model.ServicePort, error) {
	if _, other := svc.Labels[LabelServiceProxyName]; other || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil, nil
	}
	fail := objectError("Service", svc.Namespace, svc.Name)
	if svc.Namespace == "" || svc.Name == "" {
		return nil, fail("metadata", "namespace and name must be set")
	}
	clusterIPs, err := readClusterIPs(svc, fail)
	if err != nil || clusterIPs == nil {
		return nil, err
	}
	externalIPs, badExternal := readExternalIPs(svc, clusterIPs, fail)
	lbIPs, badLB := readLoadBalancerIPs(svc, clusterIPs, fail)
	ranges, badRanges := readSourceRanges(svc, clusterIPs, fail)
	affinity, err := readSessionAffinity(svc, fail)
	if err != nil {
		return nil, err
	}
	external, err := readExternalPolicy(svc, fail)
	if err != nil {
		return nil, err
	}
	internal, err := readInternalPolicy(svc, fail)
	if err != nil {
		return nil, err
	}
	healthCheck, err := readHealthCheckNodePort(svc, external, fail)
	if err != nil {
		return nil, err
	}
	tune := readTuning(svc.Annotations)
	ports, err := readPorts(svc, model.ServicePort{
		ClusterIPs:               clusterIPs,
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
	}, fail)
	if err != nil {
		return nil, err
	}
	return ports, errors.Join(slices.Concat(badExternal, badLB, badRanges)...)
}

// readClusterIPs returns the service's cluster IPs, at most one of each
// family, or none for a headless service.
func readClusterIPs(svc *v1.Service, fail fieldErrorFunc) ([]netip.Addr, error) {
	ips := svc.Spec.ClusterIPs
	ipField := func(i int) string { return fmt.Sprintf("spec.clusterIPs[%d]", i) }
	// A manifest, which no API server defaulted, may set only
	// spec.clusterIP.
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
		if hasFamilyOf(clusterIPs, ip) {
			return nil, fail(ipField(i), "%s: a second cluster IP of the same family", ip)
		}
		clusterIPs = append(clusterIPs, ip)
	}
	return clusterIPs, nil
}

// hasFamilyOf reports whether addrs hold an address of ip's family. Like
// kube-proxy's per-family proxiers, addresses of a family the service has
// no cluster IP of are left out.
func hasFamilyOf(addrs []netip.Addr, ip netip.Addr) bool {
	return slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Is4() == ip.Is4() })
}

// readExternalIPs returns the service's external IPs of its families. A
// bad address is left out alone, as kube-proxy drops it: the rest of the
// service is still programmed, and the returned error names the address.
func readExternalIPs(svc *v1.Service, clusterIPs []netip.Addr, fail fieldErrorFunc) ([]netip.Addr, []error) {
	var kept []netip.Addr
	var leftOut []error
	for i, s := range svc.Spec.ExternalIPs {
		// kube-proxy passes over an empty entry without a word.
		if strings.TrimSpace(s) == "" {
			continue
		}
		ip, err := parseServiceAddr(s)
		if err != nil {
			leftOut = append(leftOut, fail.leftOut(fmt.Sprintf("spec.externalIPs[%d]", i), "%v; the address is left out", err))
			continue
		}
		if hasFamilyOf(clusterIPs, ip) {
			kept = append(kept, ip)
		}
	}
	return kept, leftOut
}

// readLoadBalancerIPs returns the service's load-balancer ingress IPs of
// its families; a bad one is left out alone, as in readExternalIPs.
func readLoadBalancerIPs(svc *v1.Service, clusterIPs []netip.Addr, fail fieldErrorFunc) ([]netip.Addr, []error) {
	var kept []netip.Addr
	var leftOut []error
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		// A hostname-only ingress has nothing to program, and an ipMode
		// Proxy one is reached through the load balancer's own proxy, not
		// with the VIP as destination.
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy) {
			continue
		}
		ip, err := parseServiceAddr(ing.IP)
		if err != nil {
			leftOut = append(leftOut, fail.leftOut(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), "%v; the address is left out", err))
			continue
		}
		if hasFamilyOf(clusterIPs, ip) {
			kept = append(kept, ip)
		}
	}
	return kept, leftOut
}

// readSourceRanges returns the source ranges of the service's families
// that may reach its load balancers, masked. As kube-proxy reads them, one
// by one with ParseCIDRSloppy after trimming spaces, an empty entry is
// passed over and a bad one left out alone, named in the errors.
func readSourceRanges(svc *v1.Service, clusterIPs []netip.Addr, fail fieldErrorFunc) ([]netip.Prefix, []error) {
	var ranges []netip.Prefix
	var leftOut []error
	for i, s := range svc.Spec.LoadBalancerSourceRanges {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, ok := sloppy.ParsePrefix(s)
		if !ok {
			leftOut = append(leftOut, fail.leftOut(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), "%q is not a CIDR; the range is left out", s))
			continue
		}
		if hasFamilyOf(clusterIPs, p.Addr()) {
			ranges = append(ranges, p)
		}
	}
	return ranges, leftOut
}

// readSessionAffinity returns the service's ClientIP affinity timeout, or
// 0 for no affinity.
func readSessionAffinity(svc *v1.Service, fail fieldErrorFunc) (time.Duration, error) {
	switch svc.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
		return 0, nil
	case v1.ServiceAffinityClientIP:
		c := svc.Spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			return defaultAffinity, nil
		}
		secs := *c.ClientIP.TimeoutSeconds
		if secs < 1 || secs > maxAffinitySeconds {
			return 0, fail("spec.sessionAffinityConfig.clientIP.timeoutSeconds", "%d is not from 1 to %d", secs, maxAffinitySeconds)
		}
		return time.Duration(secs) * time.Second, nil
	}
	return 0, fail("spec.sessionAffinity", "unknown affinity %q (want None or ClientIP)", svc.Spec.SessionAffinity)
}

// readExternalPolicy returns the service's external traffic policy.
func readExternalPolicy(svc *v1.Service, fail fieldErrorFunc) (model.TrafficPolicy, error) {
	var accessible bool
	switch svc.Spec.Type {
	case "", v1.ServiceTypeClusterIP:
		accessible = len(svc.Spec.ExternalIPs) > 0
	case v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
		accessible = true
	default:
		return model.PolicyCluster, fail("spec.type", "unknown service type %q", svc.Spec.Type)
	}
	switch svc.Spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster:
		return model.PolicyCluster, nil
	case v1.ServiceExternalTrafficPolicyLocal:
		// The policy means nothing for a service no one reaches from
		// outside; kube-proxy ignores it there.
		if accessible {
			return model.PolicyLocal, nil
		}
		return model.PolicyCluster, nil
	}
	return model.PolicyCluster, fail("spec.externalTrafficPolicy", "unknown policy %q (want Cluster or Local)", svc.Spec.ExternalTrafficPolicy)
}

// readInternalPolicy returns the service's internal traffic policy.
func readInternalPolicy(svc *v1.Service, fail fieldErrorFunc) (model.TrafficPolicy, error) {
	p := svc.Spec.InternalTrafficPolicy
	if p == nil {
		return model.PolicyCluster, nil
	}
	switch *p {
	case v1.ServiceInternalTrafficPolicyCluster:
		return model.PolicyCluster, nil
	case v1.ServiceInternalTrafficPolicyLocal:
		return model.PolicyLocal, nil
	}
	return model.PolicyCluster, fail("spec.internalTrafficPolicy", "unknown policy %q (want Cluster or Local)", *p)
}

// readHealthCheckNodePort returns the node port load balancers check the
// node's local endpoints on, or 0 when they need not.
func readHealthCheckNodePort(svc *v1.Service, external model.TrafficPolicy, fail fieldErrorFunc) (uint16, error) {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer || external != model.PolicyLocal {
		return 0, nil
	}
	hc := svc.Spec.HealthCheckNodePort
	if hc < 0 || hc > 65535 {
		return 0, fail("spec.healthCheckNodePort", "%d is not a port", hc)
	}
	return uint16(hc), nil
}

// readPorts returns the service's ports, each a copy of shared, which
// holds what the ports of a service have in common.
func readPorts(svc *v1.Service, shared model.ServicePort, fail fieldErrorFunc) ([]model.ServicePort, error) {
	ports := make([]model.ServicePort, 0, len(svc.Spec.Ports))
	// A set, not a scan of the ports so far: a Service may list
	// thousands.
	names := make(map[string]bool, len(svc.Spec.Ports))
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
		if names[p.Name] {
			return nil, fail(field+".name", "%q names two ports", p.Name)
		}
		names[p.Name] = true
		port := shared
		port.Name = model.ServicePortName{Namespace: svc.Namespace, Name: svc.Name, Port: p.Name}
		port.Protocol = proto
		port.Port = uint16(p.Port)
		port.NodePort = uint16(p.NodePort)
		ports = append(ports, port)
	}
	return ports, nil
}

// protocol converts an API protocol; empty is the API's default, TCP.
func protocol(p v1.Protocol) (inet.Protocol, error) {
	switch p {
	case "", v1.ProtocolTCP:
		return inet.TCP, nil
	case v1.ProtocolUDP:
		return inet.UDP, nil
	case v1.ProtocolSCTP:
		return inet.SCTP, nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want TCP, UDP or SCTP)", p)
}

// parseServiceAddr parses an address a service is reached on, as
// kube-proxy does (see parseIPSloppy).
func parseServiceAddr(s string) (netip.Addr, error) {
	ip, ok := sloppy.ParseAddr(s)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("%s is not a usable unicast address", ip)
	}
	return ip, nil
}
