package randomcluster

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Env is the fixed part of a generated cluster: the node the proxy runs
// on, the node its remote endpoints are on, and the address ranges. A test
// that sends packets builds the namespaces these addresses name.
type Env struct {
	// NodeName is the node the proxy serves; RemoteNode holds the
	// endpoints that are not local.
	NodeName, RemoteNode string
	// Zones of NodeName and RemoteNode, for topology hints.
	LocalZone, RemoteZone string
	// NodeIPs are NodeName's InternalIPs, one per family.
	NodeIPs map[corev1.IPFamily]netip.Addr
	// NodeNet is the network of each node IP (the node's eth0).
	NodeNet map[corev1.IPFamily]netip.Prefix
	// ClusterCIDRs are the pod networks, PodCIDRs NodeName's part of them
	// and RemotePodCIDRs RemoteNode's.
	ClusterCIDRs, PodCIDRs, RemotePodCIDRs map[corev1.IPFamily]netip.Prefix
	// ExternalNet holds the external IPs, LoadBalancerNet the load
	// balancers' ingress IPs, and SourceNet the client ranges of
	// loadBalancerSourceRanges, per family.
	ExternalNet, LoadBalancerNet, SourceNet map[corev1.IPFamily]netip.Prefix
	// DualStack says whether the API server has a service CIDR of each
	// family; without it every Service is IPv4.
	DualStack bool
}

// DefaultEnv is the node of the e2e package's kube-proxy tests: the VM
// guest's eth0 (10.0.2.15) and an IPv6 address beside it.
func DefaultEnv() Env {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	p := netip.MustParsePrefix
	return Env{
		NodeName: "kp-node", RemoteNode: "kp-other",
		LocalZone: "zone-a", RemoteZone: "zone-b",
		NodeIPs:         map[corev1.IPFamily]netip.Addr{v4: netip.MustParseAddr("10.0.2.15"), v6: netip.MustParseAddr("fd00:10:0:2::15")},
		NodeNet:         map[corev1.IPFamily]netip.Prefix{v4: p("10.0.2.0/24"), v6: p("fd00:10:0:2::/64")},
		ClusterCIDRs:    map[corev1.IPFamily]netip.Prefix{v4: p("10.244.0.0/16"), v6: p("fd00:10:244::/56")},
		PodCIDRs:        map[corev1.IPFamily]netip.Prefix{v4: p("10.244.1.0/24"), v6: p("fd00:10:244:1::/64")},
		RemotePodCIDRs:  map[corev1.IPFamily]netip.Prefix{v4: p("10.244.2.0/24"), v6: p("fd00:10:244:2::/64")},
		ExternalNet:     map[corev1.IPFamily]netip.Prefix{v4: p("192.0.2.0/24"), v6: p("2001:db8:e::/64")},
		LoadBalancerNet: map[corev1.IPFamily]netip.Prefix{v4: p("198.51.100.0/24"), v6: p("2001:db8:1b::/64")},
		SourceNet:       map[corev1.IPFamily]netip.Prefix{v4: p("203.0.113.0/24"), v6: p("2001:db8:5::/64")},
		DualStack:       true,
	}
}

// Families are the IP families of the cluster, primary first.
func (e Env) Families() []corev1.IPFamily {
	if e.DualStack {
		return []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return []corev1.IPFamily{corev1.IPv4Protocol}
}

// nth returns the n-th address of p (n from 1), which must be inside it.
func nth(p netip.Prefix, n int) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := len(b) - 1; i >= 0 && n > 0; i-- {
		sum := int(b[i]) + n
		b[i] = byte(sum)
		n = sum >> 8
	}
	a, _ := netip.AddrFromSlice(b)
	if !p.Contains(a) {
		panic(fmt.Sprintf("randomcluster: address %d is outside %s", n, p))
	}
	return a
}

// EndpointsPerNode is how many pod addresses each node's endpoints are
// drawn from, per family: PodCIDRs' (and RemotePodCIDRs') hosts .2 up to
// .2+EndpointsPerNode-1.
const EndpointsPerNode = 6

// PodAddrs returns the pod addresses of a node (local or remote) that
// endpoints use, per family, for a test that serves them.
func (e Env) PodAddrs(local bool) map[corev1.IPFamily][]netip.Addr {
	cidrs := e.RemotePodCIDRs
	if local {
		cidrs = e.PodCIDRs
	}
	out := map[corev1.IPFamily][]netip.Addr{}
	for _, f := range e.Families() {
		for i := range EndpointsPerNode {
			out[f] = append(out[f], nth(cidrs[f], 2+i))
		}
	}
	return out
}

// TargetPorts are the ports endpoints listen on, per protocol.
var TargetPorts = map[corev1.Protocol][]int32{
	corev1.ProtocolTCP:  {8080, 9000},
	corev1.ProtocolUDP:  {5353},
	corev1.ProtocolSCTP: {9000},
}
