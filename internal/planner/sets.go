package planner

import (
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// setTypes gives each set's type and what it holds, in the words of the
// comment kube-proxy's rules carry for it.
var setTypes = []struct {
	name    string
	typ     SetType
	comment string
}{
	{model.SetIPVSAddresses, HashIP, "Addresses on the ipvs interface"},
	{model.SetOwned, HashIPPort, "Virtual servers ipvsplane made"},
	{model.SetLoopBack, HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{model.SetClusterIP, HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	{model.SetExternalIP, HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	{model.SetExternalIPLocal, HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{model.SetLoadBalancer, HashIPPort, "Kubernetes service lb portal"},
	{model.SetLoadBalancerLocal, HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{model.SetLoadBalancerFW, HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{model.SetLoadBalancerSourceIP, HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{model.SetLoadBalancerSourceNet, HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{model.SetNodePortTCP, BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	{model.SetNodePortLocalTCP, BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{model.SetNodePortUDP, BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	{model.SetNodePortLocalUDP, BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{model.SetNodePortSCTP, HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{model.SetNodePortLocalSCTP, HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{model.SetHealthCheckNodePort, BitmapPort, "Kubernetes health check node port"},
}

// kube-proxy's creation options for hash sets; bitmap:port sets cover
// ports 0-65535.
const (
	setHashSize = 1024
	setMaxElem  = 65536
	// ownedMaxElem bounds ipvsplane's own set.
	ownedMaxElem = 1 << 20
)

// SetSpecs returns every set of both families.
func SetSpecs() map[string]SetSpec {
	specs := map[string]SetSpec{}
	for _, f := range inet.Families() {
		for _, s := range setTypes {
			name := model.SetName(s.name, f)
			specs[name] = SetSpec{Name: name, Type: s.typ, Family: f, Comment: s.comment, HashSize: setHashSize, MaxElem: setMaxElem}
			if s.name == model.SetOwned {
				// One entry per virtual server: node ports on every node
				// address can outgrow kube-proxy's limit.
				specs[name] = SetSpec{Name: name, Type: s.typ, Family: f, Comment: s.comment, HashSize: setHashSize, MaxElem: ownedMaxElem}
			}
		}
	}
	return specs
}
