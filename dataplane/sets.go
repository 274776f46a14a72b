package dataplane

import "strings"

// The ipsets of kube-proxy's IPVS mode, by their IPv4 names; IPv6 sets
// carry the KUBE-6- prefix instead of KUBE-. The constant-size packet rules
// match against these.
const (
	SetLoopBack              = "KUBE-LOOP-BACK"
	SetClusterIP             = "KUBE-CLUSTER-IP"
	SetExternalIP            = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal       = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer          = "KUBE-LOAD-BALANCER"
	SetLoadBalancerLocal     = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerFW        = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerSourceIP  = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSourceNet = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP           = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP      = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP           = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP      = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP          = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP     = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort   = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSAddresses         = "KUBE-IPVS-IPS"
	// SetOwned is ipvsplane's own: the virtual servers it made. A virtual
	// server is added here before it is created and removed after it is
	// deleted, so even after a restart ipvsplane deletes only its own.
	SetOwned = "KUBE-IPVSPLANE-OWNED"
)

// setTypes gives each set's type and what it holds, in the words of the
// comment kube-proxy's rules carry for it.
var setTypes = []struct {
	name    string
	typ     SetType
	comment string
}{
	{SetIPVSAddresses, HashIP, "Addresses on the ipvs interface"},
	{SetOwned, HashIPPort, "Virtual servers ipvsplane made"},
	{SetLoopBack, HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{SetClusterIP, HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	{SetExternalIP, HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	{SetExternalIPLocal, HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancer, HashIPPort, "Kubernetes service lb portal"},
	{SetLoadBalancerLocal, HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{SetLoadBalancerFW, HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{SetLoadBalancerSourceIP, HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{SetLoadBalancerSourceNet, HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{SetNodePortTCP, BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	{SetNodePortLocalTCP, BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{SetNodePortUDP, BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	{SetNodePortLocalUDP, BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{SetNodePortSCTP, HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{SetNodePortLocalSCTP, HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{SetHealthCheckNodePort, BitmapPort, "Kubernetes health check node port"},
}

// maxSetName is the longest ipset name the kernel takes (IPSET_MAXNAMELEN
// less the terminating NUL).
const maxSetName = 31

// SetName returns a set's name in the given family: the IPv4 name, or for
// IPv6 the name with KUBE-6- in place of KUBE-, cut to the kernel's limit
// as kube-proxy cuts it (KUBE-6-LOAD-BALANCER-SOURCE-CID).
func SetName(name string, ipv6 bool) string {
	if ipv6 {
		name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	}
	if len(name) > maxSetName {
		name = name[:maxSetName]
	}
	return name
}

// kube-proxy's creation options for hash sets; bitmap:port sets cover
// ports 0-65535.
const (
	setHashSize = 1024
	setMaxElem  = 65536
	// ownedMaxElem bounds ipvsplane's own set.
	ownedMaxElem = 1 << 20
)

// setSpecs returns every set of both families.
func setSpecs() map[string]SetSpec {
	specs := map[string]SetSpec{}
	for _, ipv6 := range []bool{false, true} {
		for _, s := range setTypes {
			name := SetName(s.name, ipv6)
			specs[name] = SetSpec{Name: name, Type: s.typ, IPv6: ipv6, Comment: s.comment, HashSize: setHashSize, MaxElem: setMaxElem}
			if s.name == SetOwned {
				// One entry per virtual server: node ports on every node
				// address can outgrow kube-proxy's limit.
				specs[name] = SetSpec{Name: name, Type: s.typ, IPv6: ipv6, Comment: s.comment, HashSize: setHashSize, MaxElem: ownedMaxElem}
			}
		}
	}
	return specs
}
