package randomcluster

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kpconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// Labels that make kube-proxy skip a Service (service-proxy-name) or an
// EndpointSlice (headless).
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = corev1.IsHeadlessService
	// ManagedBy is the generated EndpointSlices' managed-by label.
	ManagedBy = "randomcluster"
)

// Cluster is one generated input.
type Cluster struct {
	Seed uint64
	Env  Env
	// Config is a KubeProxyConfiguration in IPVS mode with the node's
	// random settings; the test adds what is its own (kubeconfig,
	// hostnameOverride, bind addresses, sync periods).
	Config *kpconfig.KubeProxyConfiguration
	Node   *corev1.Node
	// Services in creation order, named svc-000, svc-001, ...
	Services []*Service
	// Neighbours are what else is on the node, if AddNeighbours added
	// them.
	Neighbours *Neighbours
}

// Service is a Service, with the load-balancer status to set once it is
// created (Status.LoadBalancer), and its EndpointSlices.
type Service struct {
	Service *corev1.Service
	Slices  []*discoveryv1.EndpointSlice
}

// Generate returns the cluster of seed: the node's settings and n
// Services.
func Generate(seed uint64, env Env, n int) *Cluster {
	g := &generator{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), env: env, used: map[string]bool{}}
	c := &Cluster{Seed: seed, Env: env, Config: g.config(), Node: g.node()}
	for i := range n {
		c.Services = append(c.Services, g.service(fmt.Sprintf("svc-%03d", i)))
	}
	return c
}

type generator struct {
	rnd *rand.Rand
	env Env
	// used holds the external and load-balancer addresses handed out.
	used map[string]bool
}

func (g *generator) chance(p float64) bool { return g.rnd.Float64() < p }

func pick[T any](g *generator, choices ...T) T { return choices[g.rnd.IntN(len(choices))] }

// Schedulers are the IPVS schedulers the node settings choose from ("" is
// kube-proxy's default, rr).
var Schedulers = []string{"", "rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq"}

// DetectLocalModes are kube-proxy's modes of telling pod traffic ("" is
// its default, ClusterCIDR).
var DetectLocalModes = []kpconfig.LocalMode{"", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"}

func (g *generator) config() *kpconfig.KubeProxyConfiguration {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	cfg := &kpconfig.KubeProxyConfiguration{Mode: "ipvs"}
	cfg.IPVS.Scheduler = pick(g, Schedulers...)
	cfg.IPVS.StrictARP = g.chance(0.5)
	cfg.IPTables.MasqueradeAll = g.chance(0.3)
	cfg.DetectLocalMode = pick(g, DetectLocalModes...)
	switch cfg.DetectLocalMode {
	case "BridgeInterface":
		cfg.DetectLocal.BridgeInterface = "kp-br0"
	case "InterfaceNamePrefix":
		cfg.DetectLocal.InterfaceNamePrefix = "kp-pod"
	}
	cidrs := []string{g.env.ClusterCIDRs[v4].String()}
	if g.env.DualStack && g.chance(0.7) {
		cidrs = append(cidrs, g.env.ClusterCIDRs[v6].String())
	}
	cfg.ClusterCIDR = joinComma(cidrs)
	addrs := [][]string{
		nil,
		{"primary"},
		{g.env.NodeNet[v4].String()},
		{"127.0.0.0/8"},
		{g.env.NodeNet[v4].String(), "127.0.0.1/32"},
	}
	if g.env.DualStack {
		addrs = append(addrs,
			[]string{g.env.NodeNet[v4].String(), g.env.NodeNet[v6].String()},
			[]string{g.env.NodeNet[v6].String()},
			[]string{"0.0.0.0/0", "::/0"})
	}
	cfg.NodePortAddresses = pick(g, addrs...)
	if g.chance(0.3) {
		// A part of the service CIDR and of the external addresses:
		// kube-proxy leaves virtual servers there alone.
		cfg.IPVS.ExcludeCIDRs = []string{"10.96.255.0/24", netip.PrefixFrom(g.env.ExternalNet[v4].Addr(), 28).String()}
		if g.env.DualStack && g.chance(0.5) {
			cfg.IPVS.ExcludeCIDRs = append(cfg.IPVS.ExcludeCIDRs, netip.PrefixFrom(g.env.ExternalNet[v6].Addr(), 120).String())
		}
	}
	return cfg
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func (g *generator) node() *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: g.env.NodeName,
		Labels: map[string]string{
			corev1.LabelHostname:       g.env.NodeName,
			corev1.LabelTopologyZone:   g.env.LocalZone,
			corev1.LabelTopologyRegion: "region-1",
		},
	}}
	for _, f := range g.env.Families() {
		n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, g.env.PodCIDRs[f].String())
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: g.env.NodeIPs[f].String()})
	}
	n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: g.env.NodeName})
	return n
}

// ipFamilies chooses a Service's families: single-stack of either family,
// or dual-stack in either order, required or preferred.
func (g *generator) ipFamilies(s *corev1.ServiceSpec) []corev1.IPFamily {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	single := corev1.IPFamilyPolicySingleStack
	if !g.env.DualStack {
		if g.chance(0.5) {
			s.IPFamilyPolicy = &single
		}
		return []corev1.IPFamily{v4}
	}
	switch g.rnd.IntN(6) {
	case 0, 1:
		s.IPFamilyPolicy, s.IPFamilies = &single, []corev1.IPFamily{v4}
	case 2:
		s.IPFamilyPolicy, s.IPFamilies = &single, []corev1.IPFamily{v6}
	case 3:
		p := corev1.IPFamilyPolicyPreferDualStack
		s.IPFamilyPolicy = &p
		return []corev1.IPFamily{v4, v6}
	default:
		p := corev1.IPFamilyPolicyRequireDualStack
		s.IPFamilyPolicy, s.IPFamilies = &p, []corev1.IPFamily{v4, v6}
		if g.chance(0.3) {
			s.IPFamilies = []corev1.IPFamily{v6, v4}
		}
	}
	return s.IPFamilies
}

// service generates one Service and its slices.
func (g *generator) service(name string) *Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s := &svc.Spec
	switch r := g.rnd.IntN(100); {
	case r < 30:
		s.Type = corev1.ServiceTypeClusterIP
	case r < 55:
		s.Type = corev1.ServiceTypeNodePort
	case r < 90:
		s.Type = corev1.ServiceTypeLoadBalancer
	default:
		s.Type, s.ClusterIP = corev1.ServiceTypeClusterIP, corev1.ClusterIPNone
	}
	families := g.ipFamilies(s)
	s.Ports = g.ports()
	if g.chance(0.2) && s.ClusterIP != corev1.ClusterIPNone {
		s.SessionAffinity = corev1.ServiceAffinityClientIP
		if g.chance(0.7) {
			t := pick[int32](g, 1, 30, 600, 10800, 86400)
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &t}}
		}
	}
	if g.chance(0.25) && s.ClusterIP != corev1.ClusterIPNone {
		s.ExternalIPs = g.addrs(g.env.ExternalNet, families, 1+g.rnd.IntN(2))
	}
	if s.Type == corev1.ServiceTypeLoadBalancer {
		g.loadBalancer(svc, families)
	}
	external := s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer || len(s.ExternalIPs) > 0
	if external && g.chance(0.35) {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if s.ClusterIP != corev1.ClusterIPNone && g.chance(0.2) {
		local := corev1.ServiceInternalTrafficPolicyLocal
		s.InternalTrafficPolicy = &local
	}
	if g.chance(0.4) {
		td := pick(g, corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode)
		s.TrafficDistribution = &td
	}
	switch r := g.rnd.IntN(100); {
	case r < 5:
		svc.Labels = map[string]string{LabelServiceProxyName: "another-proxy"}
	case r < 10:
		svc.Labels = map[string]string{LabelHeadless: ""}
	}
	out := &Service{Service: svc}
	if !g.chance(0.1) {
		out.Slices = g.slices(svc, families)
	}
	return out
}

// ports returns one to three ports, with distinct names and distinct
// port/protocol pairs, some with named target ports.
func (g *generator) ports() []corev1.ServicePort {
	n := 1 + g.rnd.IntN(3)
	var ports []corev1.ServicePort
	seen := map[string]bool{}
	for len(ports) < n {
		proto := pick(g, corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
		port := pick[int32](g, 53, 80, 443, 8080, 8443, 9000, 5000+int32(g.rnd.IntN(100)))
		key := fmt.Sprintf("%s/%d", proto, port)
		if seen[key] {
			continue
		}
		seen[key] = true
		target := pick(g, TargetPorts[proto]...)
		p := corev1.ServicePort{Name: fmt.Sprintf("p%d-%s", len(ports), lower(proto)), Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
		if g.chance(0.3) {
			p.TargetPort = intstr.FromString("t-" + strconv.Itoa(int(target)))
		}
		ports = append(ports, p)
	}
	if n == 1 && g.chance(0.5) {
		ports[0].Name = ""
	}
	return ports
}

func lower(p corev1.Protocol) string {
	return map[corev1.Protocol]string{corev1.ProtocolTCP: "tcp", corev1.ProtocolUDP: "udp", corev1.ProtocolSCTP: "sctp"}[p]
}

// addrs returns n new addresses from nets, of the given families, rarely
// of the other family.
func (g *generator) addrs(nets map[corev1.IPFamily]netip.Prefix, families []corev1.IPFamily, n int) []string {
	all := g.env.Families()
	var out []string
	for range n {
		f := pick(g, families...)
		if g.chance(0.1) {
			f = pick(g, all...)
		}
		out = append(out, g.newAddr(nets[f]).String())
	}
	return out
}

// newAddr returns an address of p no Service has yet.
func (g *generator) newAddr(p netip.Prefix) netip.Addr {
	for {
		a := nth(p, 1+g.rnd.IntN(250))
		if !g.used[a.String()] {
			g.used[a.String()] = true
			return a
		}
	}
}

// loadBalancer fills a load balancer's options and its status.
func (g *generator) loadBalancer(svc *corev1.Service, families []corev1.IPFamily) {
	s := &svc.Spec
	if g.chance(0.25) {
		no := false
		s.AllocateLoadBalancerNodePorts = &no
	}
	if g.chance(0.4) {
		v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
		ranges := []string{g.env.SourceNet[v4].String(), g.env.NodeNet[v4].String(), "0.0.0.0/0"}
		if g.env.DualStack {
			ranges = append(ranges, g.env.SourceNet[v6].String(), g.env.NodeNet[v6].String(), "::/0")
		}
		for range 1 + g.rnd.IntN(3) {
			if r := pick(g, ranges...); !slices.Contains(s.LoadBalancerSourceRanges, r) {
				s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, r)
			}
		}
	}
	for range g.rnd.IntN(3) {
		var in corev1.LoadBalancerIngress
		if g.chance(0.15) {
			in.Hostname = fmt.Sprintf("%s.lb.example", svc.Name)
		} else {
			in.IP = g.addrs(g.env.LoadBalancerNet, families, 1)[0]
			switch g.rnd.IntN(3) {
			case 0:
				m := corev1.LoadBalancerIPModeVIP
				in.IPMode = &m
			case 1:
				m := corev1.LoadBalancerIPModeProxy
				in.IPMode = &m
			}
		}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, in)
	}
}

// endpoint is a generated endpoint's identity: its address, and the node
// it is on.
type endpoint struct {
	addr  string
	local bool
}

// slices returns the Service's EndpointSlices: one to three per family of
// the Service (rarely of the other family too), with endpoints local and
// remote in every combination of conditions, hints, and now and then an
// endpoint another slice has too.
func (g *generator) slices(svc *corev1.Service, families []corev1.IPFamily) []*discoveryv1.EndpointSlice {
	fams := slices.Clone(families)
	for _, f := range g.env.Families() {
		if !slices.Contains(fams, f) && g.chance(0.1) {
			fams = append(fams, f)
		}
	}
	var out []*discoveryv1.EndpointSlice
	for _, f := range fams {
		var seen []endpoint
		for range 1 + g.rnd.IntN(3) {
			sl := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-%d", svc.Name, len(out)),
					Labels: map[string]string{
						discoveryv1.LabelServiceName: svc.Name,
						discoveryv1.LabelManagedBy:   ManagedBy,
					},
				},
				AddressType: discoveryv1.AddressType(f),
			}
			if _, ok := svc.Labels[LabelHeadless]; ok && g.chance(0.5) {
				sl.Labels[LabelHeadless] = ""
			}
			for _, p := range svc.Spec.Ports {
				if g.chance(0.05) {
					continue
				}
				num := p.TargetPort.IntVal
				if p.TargetPort.Type == intstr.String {
					num = int32(must(strconv.Atoi(p.TargetPort.StrVal[2:])))
				}
				sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &num})
			}
			for range g.rnd.IntN(5) {
				var ep endpoint
				if len(seen) > 0 && g.chance(0.15) {
					ep = pick(g, seen...)
				} else {
					ep.local = g.chance(0.45)
					ep.addr = pick(g, g.env.PodAddrs(ep.local)[f]...).String()
					seen = append(seen, ep)
				}
				sl.Endpoints = append(sl.Endpoints, g.endpoint(ep, svc.Spec.TrafficDistribution != nil))
			}
			out = append(out, sl)
		}
	}
	return out
}

// Condition is an endpoint condition drawn from rnd: unset one time in
// five, false one in five, else true.
func Condition(rnd *rand.Rand) *bool {
	switch rnd.IntN(5) {
	case 0:
		return nil
	case 1:
		f := false
		return &f
	}
	t := true
	return &t
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// endpoint returns an Endpoint with random conditions (each true, false
// or unset), node (rarely none) and hints.
func (g *generator) endpoint(ep endpoint, distribution bool) discoveryv1.Endpoint {
	cond := func() *bool { return Condition(g.rnd) }
	out := discoveryv1.Endpoint{
		Addresses:  []string{ep.addr},
		Conditions: discoveryv1.EndpointConditions{Ready: cond(), Serving: cond(), Terminating: cond()},
	}
	node, zone := g.env.RemoteNode, g.env.RemoteZone
	if ep.local {
		node, zone = g.env.NodeName, g.env.LocalZone
	}
	// The copy of an endpoint in another slice may say it is elsewhere.
	if g.chance(0.05) {
		node, zone = g.env.RemoteNode, g.env.RemoteZone
	}
	if !g.chance(0.08) {
		out.NodeName = &node
	}
	if g.chance(0.8) {
		out.Zone = &zone
	}
	if distribution && g.chance(0.7) || g.chance(0.15) {
		h := &discoveryv1.EndpointHints{}
		h.ForZones = []discoveryv1.ForZone{{Name: pick(g, g.env.LocalZone, g.env.RemoteZone)}}
		if g.chance(0.4) {
			h.ForNodes = []discoveryv1.ForNode{{Name: pick(g, g.env.NodeName, g.env.RemoteNode)}}
		}
		out.Hints = h
	}
	return out
}
