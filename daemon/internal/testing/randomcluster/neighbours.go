package randomcluster

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NeighbourKind is one kind of neighbour: another program's rules on the
// node, or the way an installer wrote the proxy's configuration.
type NeighbourKind string

// The kinds of neighbours.
const (
	// HostPortNeighbour: pods' hostPorts as the CNI portmap plugin maps
	// them with iptables (CNI-HOSTPORT-DNAT, CNI-DN-*), some on a
	// generated Service's port.
	HostPortNeighbour NeighbourKind = "hostport"
	// DockerNeighbour: Docker's published ports (the nat DOCKER chain).
	DockerNeighbour NeighbourKind = "docker"
	// ForwardDropNeighbour: FORWARD policy DROP, with a CNI's accept rules
	// for the pod networks.
	ForwardDropNeighbour NeighbourKind = "forward-drop"
	// NFTablesLeftoversNeighbour: kube-proxy's nftables mode's tables, with
	// services DNATed to endpoints that are gone.
	NFTablesLeftoversNeighbour NeighbourKind = "nftables-leftovers"
	// IPTablesLeftoversNeighbour: kube-proxy's iptables mode's chains
	// (KUBE-SERVICES, KUBE-SVC-*, KUBE-SEP-*, KUBE-NODEPORTS), likewise.
	IPTablesLeftoversNeighbour NeighbourKind = "iptables-leftovers"
	// InstallerConfigNeighbour: the configuration file as kubeadm writes
	// it, with fields since removed from KubeProxyConfiguration.
	InstallerConfigNeighbour NeighbourKind = "installer-config"
)

// NeighbourKinds are every kind, in the order a test installs them.
var NeighbourKinds = []NeighbourKind{
	HostPortNeighbour, DockerNeighbour, ForwardDropNeighbour,
	NFTablesLeftoversNeighbour, IPTablesLeftoversNeighbour, InstallerConfigNeighbour,
}

// DefaultNeighbourKinds are the kinds a test asks for by default: all of
// them.
var DefaultNeighbourKinds = NeighbourKinds

// ParseNeighbourKinds reads a comma-separated list of kinds; "all" is
// every kind, "default" DefaultNeighbourKinds.
func ParseNeighbourKinds(s string) ([]NeighbourKind, error) {
	var out []NeighbourKind
	for _, f := range strings.Split(s, ",") {
		switch k := NeighbourKind(strings.TrimSpace(f)); {
		case k == "all":
			out = append(out, NeighbourKinds...)
		case k == "default":
			out = append(out, DefaultNeighbourKinds...)
		case slices.Contains(NeighbourKinds, k):
			out = append(out, k)
		default:
			return nil, fmt.Errorf("randomcluster: unknown neighbour kind %q (want some of %v, all or default)", f, NeighbourKinds)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Neighbours are what else is on the node: other programs' packet rules,
// and how the configuration file was written. They are generated from
// the cluster's seed, after its Services, so that some collide with
// them; a test installs them before each proxy starts and removes them
// when the seed ends. Every DNAT of a neighbour goes to the neighbour pod
// (Env.NeighbourPod) on a port of its kind (NeighbourTargetPort), whose
// answer names the kind: a connection a neighbour takes is told apart.
type Neighbours struct {
	// HostPorts are pods' hostPorts (the CNI portmap plugin's rules).
	HostPorts []HostPort `json:"hostPorts,omitempty"`
	// PortmapPrepend: CNI-HOSTPORT-DNAT is inserted first in PREROUTING
	// and OUTPUT, as older portmap plugins did, rather than appended.
	PortmapPrepend bool `json:"portmapPrepend,omitempty"`
	// DockerPorts are Docker's published TCP ports, IPv4 only.
	DockerPorts []PublishedPort `json:"dockerPorts,omitempty"`
	// ForwardDrop, if set, is a FORWARD policy DROP in both families.
	ForwardDrop *ForwardDrop `json:"forwardDrop,omitempty"`
	// NFTablesLeftovers and IPTablesLeftovers are Services' ports as the
	// other modes of kube-proxy programmed them.
	NFTablesLeftovers []Leftover `json:"nftablesLeftovers,omitempty"`
	IPTablesLeftovers []Leftover `json:"iptablesLeftovers,omitempty"`
	// InstallerConfig says the configuration file is kubeadm's, removed
	// fields included (see Cluster.ConfigYAML).
	InstallerConfig bool `json:"installerConfig,omitempty"`
}

// HostPort is one pod's hostPort of a family, as portmap maps it.
type HostPort struct {
	Protocol corev1.Protocol `json:"protocol"`
	Port     int32           `json:"port"`
	Family   corev1.IPFamily `json:"family"`
	// Service names the Service whose port the host port is ("" if none).
	Service string `json:"service,omitempty"`
	// Container is the pod's container ID, which names its chain.
	Container string `json:"container"`
}

// PublishedPort is a port Docker publishes on every local address.
type PublishedPort struct {
	Port int32 `json:"port"`
	// Service names the Service whose port it is ("" if none).
	Service string `json:"service,omitempty"`
}

// ForwardDrop is a FORWARD policy DROP (Docker sets it) with a CNI's
// accept rules for the pod networks (flannel's, the bridge plugin's with
// a firewall) in AcceptFamilies; a family without them drops forwarded
// traffic that no other rule accepts.
type ForwardDrop struct {
	AcceptFamilies []corev1.IPFamily `json:"acceptFamilies,omitempty"`
}

// LeftoverWhat is what a leftover rule of a Service's port does.
type LeftoverWhat string

// What leftovers do.
const (
	// LeftoverClusterIP DNATs the Service's first cluster IP and port to a
	// gone endpoint.
	LeftoverClusterIP LeftoverWhat = "cluster-ip"
	// LeftoverNodePort DNATs its node port to a gone endpoint.
	LeftoverNodePort LeftoverWhat = "node-port"
	// LeftoverNoEndpoints rejects its cluster IP and node port, as for a
	// Service without endpoints.
	LeftoverNoEndpoints LeftoverWhat = "no-endpoints"
)

// Leftover is a rule another mode of kube-proxy left for a Service's port
// (the index of Spec.Ports), resolved by the test to what the API server
// allocated; a Service the API server refused leaves nothing.
type Leftover struct {
	Service string       `json:"service"`
	Port    int          `json:"port"`
	What    LeftoverWhat `json:"what"`
}

// Services names the Services the neighbours collide with or are
// leftovers of, sorted.
func (n *Neighbours) Services() []string {
	var out []string
	for _, h := range n.HostPorts {
		out = append(out, h.Service)
	}
	for _, d := range n.DockerPorts {
		out = append(out, d.Service)
	}
	for _, l := range append(slices.Clone(n.NFTablesLeftovers), n.IPTablesLeftovers...) {
		out = append(out, l.Service)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// NeighbourPod is the pod the neighbours' DNAT rules send to: PodCIDRs'
// .200 of the family.
func (e Env) NeighbourPod(f corev1.IPFamily) netip.Addr { return nth(e.PodCIDRs[f], 200) }

// neighbourTargets are the neighbour pod's ports, by kind and protocol.
var neighbourTargets = map[NeighbourKind]map[corev1.Protocol]int32{
	HostPortNeighbour:          {corev1.ProtocolTCP: 18080, corev1.ProtocolUDP: 18053},
	DockerNeighbour:            {corev1.ProtocolTCP: 18081},
	NFTablesLeftoversNeighbour: {corev1.ProtocolTCP: 18082, corev1.ProtocolUDP: 18054},
	IPTablesLeftoversNeighbour: {corev1.ProtocolTCP: 18083, corev1.ProtocolUDP: 18055},
}

// NeighbourTargetPort is the port of the neighbour pod that a kind's DNAT
// rules of a protocol send to (0: none, SCTP).
func NeighbourTargetPort(k NeighbourKind, p corev1.Protocol) int32 { return neighbourTargets[k][p] }

// NeighbourTargets lists the kinds with DNAT rules and their ports, for a
// test to serve them.
func NeighbourTargets() map[NeighbourKind]map[corev1.Protocol]int32 {
	out := map[NeighbourKind]map[corev1.Protocol]int32{}
	for k, m := range neighbourTargets {
		out[k] = map[corev1.Protocol]int32{}
		for p, port := range m {
			out[k][p] = port
		}
	}
	return out
}

// AddNeighbours generates the cluster's neighbours of the given kinds,
// from its seed and Services: the same seed and Services give the same
// neighbours. It draws from a stream of its own, so a seed's Services
// and node settings are the same with neighbours or without.
func (c *Cluster) AddNeighbours(kinds []NeighbourKind) {
	g := &generator{rnd: rand.New(rand.NewPCG(c.Seed, c.Seed^0x6e65696768626f75)), env: c.Env}
	n := &Neighbours{}
	has := func(k NeighbourKind) bool { return slices.Contains(kinds, k) }
	taken := map[string]bool{}
	if has(HostPortNeighbour) {
		n.HostPorts = g.hostPorts(c.Services, taken)
		n.PortmapPrepend = g.chance(0.3)
	}
	if has(DockerNeighbour) {
		n.DockerPorts = g.dockerPorts(c.Services, taken)
	}
	if has(ForwardDropNeighbour) {
		n.ForwardDrop = &ForwardDrop{AcceptFamilies: g.env.Families()}
		// A CNI configured for IPv4 only, on a node whose other programs
		// drop forwarded IPv6 too (Docker does).
		if g.env.DualStack && g.chance(0.3) {
			n.ForwardDrop.AcceptFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
	}
	if has(NFTablesLeftoversNeighbour) {
		n.NFTablesLeftovers = g.leftovers(c.Services)
	}
	if has(IPTablesLeftoversNeighbour) {
		n.IPTablesLeftovers = g.leftovers(c.Services)
	}
	n.InstallerConfig = has(InstallerConfigNeighbour)
	c.Neighbours = n
}

// servicePort picks, with probability p, a TCP or UDP port of a random
// Service the proxies serve, and one of its families; ok is false
// otherwise.
func (g *generator) servicePort(svcs []*Service, p float64, tcpOnly bool) (svc string, port corev1.ServicePort, family corev1.IPFamily, ok bool) {
	if !g.chance(p) {
		return "", port, "", false
	}
	var cands []int
	for i, s := range svcs {
		if s.Service.Spec.ClusterIP != corev1.ClusterIPNone && len(s.Service.Labels) == 0 {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return "", port, "", false
	}
	s := svcs[pick(g, cands...)].Service
	port = pick(g, s.Spec.Ports...)
	if port.Protocol == corev1.ProtocolSCTP || tcpOnly && port.Protocol != corev1.ProtocolTCP {
		return "", port, "", false
	}
	return s.Name, port, pick(g, g.env.serviceFamilies(&s.Spec)...), true
}

// serviceFamilies are the families the API server gives a generated
// Service: those it asks for, else both with a dual-stack policy, else
// the primary.
func (e Env) serviceFamilies(s *corev1.ServiceSpec) []corev1.IPFamily {
	switch {
	case len(s.IPFamilies) > 0:
		return s.IPFamilies
	case s.IPFamilyPolicy != nil && *s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack:
		return e.Families()
	}
	return e.Families()[:1]
}

// hostPorts returns one to three pods' hostPorts, most on a Service's
// port; no two on the same protocol, port and family.
func (g *generator) hostPorts(svcs []*Service, taken map[string]bool) []HostPort {
	var out []HostPort
	for range 1 + g.rnd.IntN(3) {
		h := HostPort{Protocol: pick(g, corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP), Family: pick(g, g.env.Families()...)}
		h.Port = pick[int32](g, 80, 443, 8443, 10254)
		if h.Protocol == corev1.ProtocolUDP {
			h.Port = pick[int32](g, 53, 8472, 5353)
		}
		if name, p, f, ok := g.servicePort(svcs, 0.7, false); ok {
			h.Service, h.Protocol, h.Port, h.Family = name, p.Protocol, p.Port, f
		}
		h.Container = fmt.Sprintf("%016x", g.rnd.Uint64())
		key := fmt.Sprintf("%s/%d/%s", h.Protocol, h.Port, h.Family)
		if taken[key] {
			continue
		}
		taken[key] = true
		out = append(out, h)
	}
	return out
}

// dockerPorts returns up to two published ports, most on a Service's TCP
// port, none on a host port's.
func (g *generator) dockerPorts(svcs []*Service, taken map[string]bool) []PublishedPort {
	var out []PublishedPort
	for range 1 + g.rnd.IntN(2) {
		d := PublishedPort{Port: pick[int32](g, 80, 3000, 8080, 8443)}
		// Docker publishes IPv4 only: its collisions are with IPv4.
		if name, p, f, ok := g.servicePort(svcs, 0.7, true); ok && f == corev1.IPv4Protocol {
			d.Service, d.Port = name, p.Port
		}
		key := fmt.Sprintf("TCP/%d/%s", d.Port, corev1.IPv4Protocol)
		if taken[key] {
			continue
		}
		taken[key] = true
		out = append(out, d)
	}
	return out
}

// leftovers returns one to four leftover rules of random Services' ports.
func (g *generator) leftovers(svcs []*Service) []Leftover {
	if len(svcs) == 0 {
		return nil
	}
	var out []Leftover
	for range 1 + g.rnd.IntN(4) {
		s := pick(g, svcs...).Service
		l := Leftover{Service: s.Name, Port: g.rnd.IntN(len(s.Spec.Ports)), What: pick(g, LeftoverClusterIP, LeftoverNodePort, LeftoverNoEndpoints)}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
