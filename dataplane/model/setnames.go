package model

import (
	"strings"

	"github.com/ipvsplane/ipvsplane/inet"
)

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

// maxSetName is the longest ipset name the kernel takes (IPSET_MAXNAMELEN
// less the terminating NUL).
const maxSetName = 31

// SetName returns a set's name in the given family: the IPv4 name, or for
// IPv6 the name with KUBE-6- in place of KUBE-, cut to the kernel's limit
// as kube-proxy cuts it (KUBE-6-LOAD-BALANCER-SOURCE-CID).
func SetName(name string, f inet.Family) string {
	if f == inet.IPv6 {
		name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	}
	if len(name) > maxSetName {
		name = name[:maxSetName]
	}
	return name
}
