package model

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
)

// ServiceProtocol reports whether Kubernetes services carry a protocol:
// TCP, UDP or SCTP.
func ServiceProtocol(p inet.Protocol) bool {
	return p == inet.TCP || p == inet.UDP || p == inet.SCTP
}

// TrafficPolicy says which endpoints traffic may reach: any in the cluster,
// or only those on this node.
type TrafficPolicy uint8

// The traffic policies of a service.
const (
	PolicyCluster TrafficPolicy = iota
	PolicyLocal
)

func (p TrafficPolicy) String() string {
	if p == PolicyLocal {
		return "Local"
	}
	return "Cluster"
}

// ServicePortName identifies one port of a service, as kube-proxy does:
// namespace, service name and the port's name (empty for a single unnamed
// port).
type ServicePortName struct {
	Namespace string
	Name      string
	Port      string
}

// String returns "namespace/name:port", or "namespace/name" for an unnamed
// port.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.Namespace + "/" + n.Name
	}
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// Change is a new version of one service port, or with Port nil, its
// removal: what a watcher of services hands the dataplane and what a
// sync says it programmed.
type Change struct {
	Name ServicePortName
	Port *ServicePort
}

// ServicePort is one port of a service with its endpoints: the unit the
// dataplane programs.
type ServicePort struct {
	Name     ServicePortName
	Protocol inet.Protocol
	// Port is the service port on the cluster, external and load-balancer
	// addresses.
	Port uint16
	// ClusterIPs holds at most one address per family.
	ClusterIPs []netip.Addr
	// NodePort is 0 when the service has none.
	NodePort    uint16
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are the ingress addresses of the service's load
	// balancer that traffic reaches the node with (ipMode VIP).
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges restricts which clients may reach the
	// load-balancer addresses; empty allows all.
	LoadBalancerSourceRanges []netip.Prefix
	// SessionAffinity is the ClientIP affinity timeout; 0 means none.
	SessionAffinity time.Duration
	ExternalPolicy  TrafficPolicy
	InternalPolicy  TrafficPolicy
	// HealthCheckNodePort is served for ExternalPolicy Local load balancers.
	HealthCheckNodePort uint16
	// Scheduler overrides the node's IPVS scheduler for this service. One
	// the kernel does not have gives the node's instead (SchedulerError):
	// a service is never left out for its scheduler.
	Scheduler string
	// SchedulerFlags replace the scheduler's default flags when set; those
	// the scheduler does not read are dropped (SettingError).
	SchedulerFlags SchedulerFlags
	// DrainTimeout overrides dataplane.Config.DrainTimeout for the real
	// servers of this port's virtual servers; 0 keeps the node's bound.
	DrainTimeout time.Duration
	// BadSettings are the settings the source could not read: the port is
	// programmed without them, and each is reported.
	BadSettings []BadSetting
	Endpoints   []Endpoint
}

// Endpoint is one backend of a service port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
	// Ready, Serving and Terminating are the EndpointSlice conditions.
	Ready       bool
	Serving     bool
	Terminating bool
	// NodeName is the node the endpoint runs on.
	NodeName string
	Zone     string
	// Hints are the topology hints, nil when the endpoint has none. Many
	// endpoints share one; it must not be modified.
	Hints *Hints
}

// Hints are an endpoint's topology hints: the zones and the nodes that
// should use it (EndpointSlice hints.forZones and hints.forNodes, set for
// a service's trafficDistribution).
type Hints struct {
	ForZones []string
	ForNodes []string
}

// Node holds this node's identity and the settings that apply to every
// service.
type Node struct {
	Name string
	// Zone is the node's topology.kubernetes.io/zone, for topology hints.
	Zone string
	// Addresses are the node's own addresses, those of its interfaces, from
	// which node ports are served: those inside NodePortAddresses, or,
	// when it is empty, these. A service address among them is local
	// already and is not bound to the dummy device.
	Addresses []netip.Addr
	// NodeIPs are the node's IPs as its Node object gives them (InternalIP
	// first, then ExternalIP). The first of each family is the node's
	// primary IP: a load balancer's source ranges let the node itself
	// through when they hold it (a family without one has its loopback
	// address, as in kube-proxy). Empty means any of Addresses for the
	// addresses that serve node ports.
	NodeIPs []netip.Addr
	// NodePortAddresses limit the node addresses that serve node ports,
	// per family as kube-proxy reads them: a family with no prefix here
	// (and no primary IP from NodePortPrimary) serves them on all its
	// addresses, and so does one with a prefix of length 0.
	NodePortAddresses []netip.Prefix
	// NodePortPrimary adds the node's primary IPs (the first NodeIPs of
	// each family, as /32 and /128) to NodePortAddresses: kube-proxy's
	// "primary".
	NodePortPrimary bool
	// Scheduler is the default IPVS scheduler ("rr" when empty).
	Scheduler string
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// MasqueradeMark is the fwmark that marks packets for masquerade: one
	// bit, kube-proxy's 1<<masqueradeBit. Zero is kube-proxy's default,
	// bit 14 (0x4000); bit 0 is mark 1.
	MasqueradeMark uint32
	// Local traffic detection: traffic to a cluster IP that does not come
	// from a pod is masqueraded. Pods are recognised by the first of these
	// that is set: their address ranges, the prefix of their host-side
	// interfaces' names ("veth"), or the bridge they sit behind ("cni0").
	// With none set, only traffic whose source is a cluster IP is.
	ClusterCIDRs       []netip.Prefix
	PodInterfacePrefix string
	PodBridge          string
	// IPv4Only serves IPv4 alone, as kube-proxy does on a kernel without
	// IPv6 (booted with ipv6.disable=1, or with IPv6 disabled): no IPv6
	// virtual server, address, set entry, set or rules. The dataplane
	// sets it itself on such a kernel.
	IPv4Only bool
	// StrictARP makes the node answer ARP only for addresses on the
	// receiving interface, so the VIPs on kube-ipvs0 are not announced.
	StrictARP bool
	// ExcludeCIDRs are ranges whose IPVS virtual servers are never removed.
	ExcludeCIDRs []netip.Prefix
	// ExternalIPRanges limit the external IPs served: any tenant who may
	// create a Service writes them, so one outside these ranges gets no
	// virtual server, address or set entry (SettingError). Empty serves
	// every one, as kube-proxy does.
	ExternalIPRanges []netip.Prefix
	// ProtectedPorts are ports of the node's own addresses (Addresses)
	// that no external IP or load-balancer address gets a virtual server
	// on (SettingError): the ports the node's own programs listen on,
	// such as the kubelet's, the daemon's and an overlay's, which a
	// virtual server there would take over.
	ProtectedPorts []ProtectedPort
	// AllowedSchedulers limit the IPVS schedulers a service port may name;
	// one naming another gets the node's (SchedulerError). Empty allows
	// every scheduler the kernel has.
	AllowedSchedulers []string
	// Timeouts for IPVS connections; zero leaves the kernel's value.
	TCPTimeout    time.Duration
	TCPFinTimeout time.Duration
	UDPTimeout    time.Duration
}

// ProtectedPort is a port of the node's addresses kept for the node's
// own programs.
type ProtectedPort struct {
	Protocol inet.Protocol
	Port     uint16
}

// String returns "port/protocol", as "10250/tcp".
func (p ProtectedPort) String() string {
	return strconv.Itoa(int(p.Port)) + "/" + p.Protocol.String()
}

// State is the desired state the dataplane programs: the node and every
// service port.
type State struct {
	Node     Node
	Services []ServicePort
}
