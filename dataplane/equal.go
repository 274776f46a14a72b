package dataplane

import "slices"

// equalServicePort reports whether two service ports are the same, field
// by field; the planner calls it for every port on every update, so it
// avoids reflection.
func equalServicePort(a, b *ServicePort) bool {
	return a.Name == b.Name &&
		a.Protocol == b.Protocol &&
		a.Port == b.Port &&
		a.NodePort == b.NodePort &&
		a.SessionAffinity == b.SessionAffinity &&
		a.ExternalPolicy == b.ExternalPolicy &&
		a.InternalPolicy == b.InternalPolicy &&
		a.HealthCheckNodePort == b.HealthCheckNodePort &&
		a.Scheduler == b.Scheduler &&
		slices.Equal(a.ClusterIPs, b.ClusterIPs) &&
		slices.Equal(a.ExternalIPs, b.ExternalIPs) &&
		slices.Equal(a.LoadBalancerIPs, b.LoadBalancerIPs) &&
		slices.Equal(a.LoadBalancerSourceRanges, b.LoadBalancerSourceRanges) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, equalEndpoint)
}

func equalEndpoint(a, b Endpoint) bool {
	return a.Addr == b.Addr && a.Port == b.Port &&
		a.Ready == b.Ready && a.Serving == b.Serving && a.Terminating == b.Terminating &&
		a.NodeName == b.NodeName && a.Zone == b.Zone &&
		slices.Equal(a.ZoneHints, b.ZoneHints)
}

// equalNode reports whether two nodes' settings are the same; a change of
// any of them re-plans everything.
func equalNode(a, b *Node) bool {
	return a.Name == b.Name && a.Zone == b.Zone &&
		slices.Equal(a.Addresses, b.Addresses) &&
		slices.Equal(a.NodePortAddresses, b.NodePortAddresses) &&
		a.Scheduler == b.Scheduler &&
		a.MasqueradeAll == b.MasqueradeAll &&
		a.MasqueradeBit == b.MasqueradeBit &&
		slices.Equal(a.ClusterCIDRs, b.ClusterCIDRs) &&
		a.PodInterfacePrefix == b.PodInterfacePrefix && a.PodBridge == b.PodBridge &&
		a.StrictARP == b.StrictARP &&
		slices.Equal(a.ExcludeCIDRs, b.ExcludeCIDRs) &&
		a.TCPTimeout == b.TCPTimeout && a.TCPFinTimeout == b.TCPFinTimeout && a.UDPTimeout == b.UDPTimeout
}
