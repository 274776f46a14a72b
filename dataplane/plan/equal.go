package plan

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// fingerprint hashes every field of a service port. The planner keeps
// fingerprints, not copies, of the ports it has seen: a copy of a large
// cluster's model would double its memory. Two different ports hash alike
// with a chance of one in 2^64.
func fingerprint(seed maphash.Seed, s *model.ServicePort) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	str := func(v string) {
		h.WriteString(v)
		h.WriteByte(0)
	}
	num := func(v uint64) {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	// Appended to a buffer on the stack: MarshalBinary allocated for
	// every address of every endpoint, a tenth of a first sync's
	// allocations.
	var buf [32]byte
	addr := func(ip netip.Addr) {
		b, _ := ip.AppendBinary(buf[:0])
		num(uint64(len(b)))
		h.Write(b)
	}
	addrs := func(a []netip.Addr) {
		num(uint64(len(a)))
		for _, ip := range a {
			addr(ip)
		}
	}
	str(s.Name.Namespace)
	str(s.Name.Name)
	str(s.Name.Port)
	num(uint64(s.Protocol)<<48 | uint64(s.Port)<<32 | uint64(s.NodePort)<<16 | uint64(s.HealthCheckNodePort))
	num(uint64(s.SessionAffinity))
	num(uint64(s.ExternalPolicy)<<8 | uint64(s.InternalPolicy))
	str(s.Scheduler)
	num(uint64(s.SchedulerFlags))
	num(uint64(s.DrainTimeout))
	num(uint64(len(s.BadSettings)))
	for _, b := range s.BadSettings {
		str(b.Field)
		str(b.Value)
		str(b.Reason)
	}
	addrs(s.ClusterIPs)
	addrs(s.ExternalIPs)
	addrs(s.LoadBalancerIPs)
	num(uint64(len(s.LoadBalancerSourceRanges)))
	for _, p := range s.LoadBalancerSourceRanges {
		b, _ := p.AppendBinary(buf[:0])
		h.Write(b)
	}
	num(uint64(len(s.Endpoints)))
	for _, ep := range s.Endpoints {
		addr(ep.Addr)
		var flags uint64
		for i, f := range []bool{ep.Ready, ep.Serving, ep.Terminating} {
			if f {
				flags |= 1 << i
			}
		}
		num(uint64(ep.Port)<<8 | flags)
		str(ep.NodeName)
		str(ep.Zone)
		var zones, nodes []string
		if ep.Hints != nil {
			zones, nodes = ep.Hints.ForZones, ep.Hints.ForNodes
		}
		for _, names := range [][]string{zones, nodes} {
			num(uint64(len(names)))
			for _, name := range names {
				str(name)
			}
		}
	}
	return h.Sum64()
}

// equalNode reports whether two nodes' settings are the same; a change of
// any of them re-plans everything.
func equalNode(a, b *model.Node) bool {
	return a.Name == b.Name && a.Zone == b.Zone &&
		slices.Equal(a.Addresses, b.Addresses) && slices.Equal(a.NodeIPs, b.NodeIPs) &&
		slices.Equal(a.NodePortAddresses, b.NodePortAddresses) && a.NodePortPrimary == b.NodePortPrimary &&
		a.Scheduler == b.Scheduler &&
		a.MasqueradeAll == b.MasqueradeAll &&
		a.MasqueradeMark == b.MasqueradeMark &&
		slices.Equal(a.ClusterCIDRs, b.ClusterCIDRs) &&
		a.PodInterfacePrefix == b.PodInterfacePrefix && a.PodBridge == b.PodBridge &&
		a.StrictARP == b.StrictARP && a.IPv4Only == b.IPv4Only &&
		slices.Equal(a.ExcludeCIDRs, b.ExcludeCIDRs) && slices.Equal(a.ExternalIPRanges, b.ExternalIPRanges) &&
		slices.Equal(a.ProtectedPorts, b.ProtectedPorts) && slices.Equal(a.AllowedSchedulers, b.AllowedSchedulers) &&
		a.TCPTimeout == b.TCPTimeout && a.TCPFinTimeout == b.TCPFinTimeout && a.UDPTimeout == b.UDPTimeout
}

// cloneServicePort copies a service port deeply, so the planner's copy of
// a port it must try again cannot change when the caller reuses its model.
func cloneServicePort(s *model.ServicePort) *model.ServicePort {
	c := *s
	c.ClusterIPs = slices.Clone(s.ClusterIPs)
	c.ExternalIPs = slices.Clone(s.ExternalIPs)
	c.LoadBalancerIPs = slices.Clone(s.LoadBalancerIPs)
	c.LoadBalancerSourceRanges = slices.Clone(s.LoadBalancerSourceRanges)
	c.BadSettings = slices.Clone(s.BadSettings)
	c.Endpoints = slices.Clone(s.Endpoints)
	for i := range c.Endpoints {
		if h := s.Endpoints[i].Hints; h != nil {
			c.Endpoints[i].Hints = &model.Hints{ForZones: slices.Clone(h.ForZones), ForNodes: slices.Clone(h.ForNodes)}
		}
	}
	return &c
}

// cloneNode copies a node's settings deeply.
func cloneNode(n model.Node) model.Node {
	n.Addresses = slices.Clone(n.Addresses)
	n.NodeIPs = slices.Clone(n.NodeIPs)
	n.NodePortAddresses = slices.Clone(n.NodePortAddresses)
	n.ClusterCIDRs = slices.Clone(n.ClusterCIDRs)
	n.ExcludeCIDRs = slices.Clone(n.ExcludeCIDRs)
	n.ExternalIPRanges = slices.Clone(n.ExternalIPRanges)
	n.ProtectedPorts = slices.Clone(n.ProtectedPorts)
	n.AllowedSchedulers = slices.Clone(n.AllowedSchedulers)
	return n
}
