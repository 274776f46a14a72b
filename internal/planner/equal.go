package planner

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// portHashes are a service port's hashes, made in one pass over it by
// hashPort.
type portHashes struct {
	// fingerprint hashes every field of the port. The planner keeps
	// fingerprints, not copies, of the ports it has seen: a copy of a large
	// cluster's model would double its memory. Two different ports hash
	// alike with a chance of one in 2^64.
	fingerprint uint64
	// endpoints hashes the port's endpoints of each family, 0 for none:
	// what conntrack reconciliation compares (flowIndex.update).
	endpoints inet.PerFamily[uint64]
}

// hashPort hashes a service port in one pass. Each endpoint is written
// once, to its family's hash; the fingerprint takes every other field,
// the family of each endpoint in turn and those hashes, so two ports
// whose endpoints differ in anything, their order included, still have
// different fingerprints.
func hashPort(seed maphash.Seed, s *model.ServicePort) portHashes {
	var h hasher
	h.SetSeed(seed)
	h.str(s.Name.Namespace)
	h.str(s.Name.Name)
	h.str(s.Name.Port)
	h.num(uint64(s.Protocol)<<48 | uint64(s.Port)<<32 | uint64(s.NodePort)<<16 | uint64(s.HealthCheckNodePort))
	h.num(uint64(s.SessionAffinity))
	h.num(uint64(s.ExternalPolicy)<<8 | uint64(s.InternalPolicy))
	h.str(s.Scheduler)
	h.num(uint64(s.SchedulerFlags))
	h.num(uint64(s.DrainTimeout))
	h.num(uint64(len(s.BadSettings)))
	for _, b := range s.BadSettings {
		h.str(b.Field)
		h.str(b.Value)
		h.str(b.Reason)
	}
	h.addrs(s.ClusterIPs)
	h.addrs(s.ExternalIPs)
	h.addrs(s.LoadBalancerIPs)
	h.num(uint64(len(s.LoadBalancerSourceRanges)))
	for _, p := range s.LoadBalancerSourceRanges {
		b, _ := p.AppendBinary(h.buf[:0])
		h.Write(b)
	}
	h.num(uint64(len(s.Endpoints)))
	var fams inet.PerFamily[hasher]
	var has inet.PerFamily[bool]
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		f := inet.FamilyOf(ep.Addr)
		h.WriteByte(byte(f))
		if !has.Get(f) {
			fams.Of(f).SetSeed(seed)
			*has.Of(f) = true
		}
		fams.Of(f).endpoint(ep)
	}
	var out portHashes
	for _, f := range inet.Families() {
		// The families written above say which of them have endpoints.
		if has.Get(f) {
			sum := fams.Of(f).Sum64()
			h.num(sum)
			// Never 0, which stands for none.
			*out.endpoints.Of(f) = sum | 1
		}
	}
	out.fingerprint = h.Sum64()
	return out
}

// hasher writes a model's fields to a hash, each delimited so that two
// different sequences of fields never write the same bytes.
type hasher struct {
	maphash.Hash
	// buf is where numbers and addresses are encoded: AppendBinary into
	// a fresh slice allocated for every address of every endpoint, a
	// tenth of a first sync's allocations.
	buf [32]byte
}

func (h *hasher) str(v string) {
	h.WriteString(v)
	h.WriteByte(0)
}

func (h *hasher) num(v uint64) {
	binary.LittleEndian.PutUint64(h.buf[:8], v)
	h.Write(h.buf[:8])
}

func (h *hasher) addr(ip netip.Addr) {
	b, _ := ip.AppendBinary(h.buf[8:8])
	h.num(uint64(len(b)))
	h.Write(b)
}

func (h *hasher) addrs(a []netip.Addr) {
	h.num(uint64(len(a)))
	for _, ip := range a {
		h.addr(ip)
	}
}

// endpoint writes every field of an endpoint.
func (h *hasher) endpoint(ep *model.Endpoint) {
	h.addr(ep.Addr)
	var flags uint64
	for i, f := range []bool{ep.Ready, ep.Serving, ep.Terminating} {
		if f {
			flags |= 1 << i
		}
	}
	h.num(uint64(ep.Port)<<8 | flags)
	h.str(ep.NodeName)
	h.str(ep.Zone)
	var zones, nodes []string
	if ep.Hints != nil {
		zones, nodes = ep.Hints.ForZones, ep.Hints.ForNodes
	}
	for _, names := range [][]string{zones, nodes} {
		h.num(uint64(len(names)))
		for _, name := range names {
			h.str(name)
		}
	}
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
