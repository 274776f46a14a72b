package randomcluster

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Shapes names the shapes a Service covers ("type=LoadBalancer",
// "lb-ipmode=Proxy", "source-range=::/0", "conditions=ready:nil,..."),
// sorted, for a test to count coverage and a log to say what a case is.
func (s *Service) Shapes() []string {
	set := map[string]bool{}
	add := func(f string, a ...any) { set[fmt.Sprintf(f, a...)] = true }
	spec := s.Service.Spec
	if spec.ClusterIP == corev1.ClusterIPNone {
		add("headless")
	} else {
		add("type=%s", spec.Type)
	}
	if spec.IPFamilyPolicy != nil {
		add("family-policy=%s", *spec.IPFamilyPolicy)
	}
	for i, f := range spec.IPFamilies {
		add("family-%d=%s", i, f)
	}
	if len(spec.Ports) > 1 {
		add("ports=several")
	}
	for _, p := range spec.Ports {
		add("protocol=%s", p.Protocol)
		if p.TargetPort.Type == intstr.String {
			add("target-port=named")
		}
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		add("affinity=ClientIP")
		if spec.SessionAffinityConfig != nil {
			add("affinity-timeout")
		}
	}
	if len(spec.ExternalIPs) > 0 {
		add("external-ips")
	}
	if spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		add("etp=Local")
	}
	if spec.InternalTrafficPolicy != nil {
		add("itp=%s", *spec.InternalTrafficPolicy)
	}
	if spec.TrafficDistribution != nil {
		add("traffic-distribution=%s", *spec.TrafficDistribution)
	}
	if spec.AllocateLoadBalancerNodePorts != nil && !*spec.AllocateLoadBalancerNodePorts {
		add("lb-no-node-ports")
	}
	for _, r := range spec.LoadBalancerSourceRanges {
		if p := netip.MustParsePrefix(r); p.Bits() == 0 {
			add("source-range=%s", r)
		} else {
			add("source-range=%s", map[bool]string{true: "IPv4", false: "IPv6"}[p.Addr().Is4()])
		}
	}
	for _, in := range s.Service.Status.LoadBalancer.Ingress {
		switch {
		case in.Hostname != "":
			add("lb-hostname")
		case in.IPMode == nil:
			add("lb-ipmode=unset")
		default:
			add("lb-ipmode=%s", *in.IPMode)
		}
	}
	for k := range s.Service.Labels {
		add("label=%s", k)
	}
	if len(s.Slices) == 0 {
		add("no-endpoints")
	}
	s.sliceShapes(add)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *Service) sliceShapes(add func(string, ...any)) {
	where := map[string]map[string]bool{}
	for _, sl := range s.Slices {
		add("slice-family=%s", sl.AddressType)
		if _, ok := sl.Labels[LabelHeadless]; ok {
			add("slice-label=headless")
		}
		for _, ep := range sl.Endpoints {
			c := ep.Conditions
			add("conditions=ready:%s,serving:%s,terminating:%s", cond(c.Ready), cond(c.Serving), cond(c.Terminating))
			if ep.NodeName == nil {
				add("endpoint-node=unset")
			} else {
				add("endpoint-node=%s", *ep.NodeName)
			}
			if ep.Hints != nil {
				add("hints=zones")
				if len(ep.Hints.ForNodes) > 0 {
					add("hints=nodes")
				}
			}
			if where[ep.Addresses[0]] == nil {
				where[ep.Addresses[0]] = map[string]bool{}
			}
			where[ep.Addresses[0]][sl.Name] = true
		}
	}
	for _, in := range where {
		if len(in) > 1 {
			add("endpoint-in-several-slices")
		}
	}
}

func cond(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}
