package dataplane

import (
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Translations between the dataplane's values and the kernel packages',
// which all name a protocol by its IP protocol number.

func (p Protocol) ipvs() ipvs.Protocol           { return ipvs.Protocol(protocolNumber(p)) }
func (p Protocol) conntrack() conntrack.Protocol { return conntrack.Protocol(protocolNumber(p)) }

func protocolFromIPVS(n ipvs.Protocol) (Protocol, bool) {
	for _, p := range [...]Protocol{TCP, UDP, SCTP} {
		if p.ipvs() == n {
			return p, true
		}
	}
	return 0, false
}

func (v VirtualServer) ipvsService() ipvs.Service {
	s := ipvs.Service{Protocol: v.Protocol.ipvs(), Addr: v.Addr, Port: v.Port, Scheduler: ipvs.Scheduler(v.Scheduler)}
	s.Flags |= v.SchedulerFlags.ipvs()
	if v.Persistence > 0 {
		s.Flags |= ipvs.Persistent
		s.Timeout = v.Persistence
	}
	return s
}

// kernelSchedulerFlags pairs the numbered scheduler flags with the
// kernel's bits.
var kernelSchedulerFlags = [...]struct {
	flag SchedulerFlags
	ipvs ipvs.ServiceFlags
}{{SchedFlag1, ipvs.SHFallback}, {SchedFlag2, ipvs.SHPort}, {SchedFlag3, ipvs.Sched3}}

func (f SchedulerFlags) ipvs() ipvs.ServiceFlags {
	var out ipvs.ServiceFlags
	for _, k := range kernelSchedulerFlags {
		if f&k.flag != 0 {
			out |= k.ipvs
		}
	}
	return out
}

func schedulerFlagsFromIPVS(f ipvs.ServiceFlags) SchedulerFlags {
	var out SchedulerFlags
	for _, k := range kernelSchedulerFlags {
		if f&k.ipvs != 0 {
			out |= k.flag
		}
	}
	return out
}

func (k VirtualKey) ipvsService() ipvs.Service {
	return ipvs.Service{Protocol: k.Protocol.ipvs(), Addr: k.Addr, Port: k.Port}
}

// VirtualKeyOf names a kernel virtual service as the desired state does;
// false for a firewall-mark service or a protocol services do not use,
// which are not ipvsplane's.
func VirtualKeyOf(s ipvs.Service) (VirtualKey, bool) {
	p, ok := protocolFromIPVS(s.Protocol)
	if !ok || s.FirewallMark != 0 {
		return VirtualKey{}, false
	}
	return VirtualKey{Addr: s.Addr.Unmap(), Port: s.Port, Protocol: p}, true
}

// virtualFromIPVS reads a kernel service; see VirtualKeyOf for those that
// are not ipvsplane's.
func virtualFromIPVS(s ipvs.Service) (VirtualServer, bool) {
	k, ok := VirtualKeyOf(s)
	if !ok {
		return VirtualServer{}, false
	}
	v := VirtualServer{
		VirtualKey:     k,
		Scheduler:      string(s.Scheduler),
		SchedulerFlags: schedulerFlagsFromIPVS(s.Flags),
	}
	if s.Flags&ipvs.Persistent != 0 {
		v.Persistence = s.Timeout.Round(time.Second)
	}
	return v, true
}

func (r RealServer) ipvsDestination() ipvs.Destination {
	return ipvs.Destination{Addr: r.Addr, Port: r.Port, Forward: ipvs.Masquerade, Weight: r.Weight, Drained: r.Weight == 0}
}

// realsFromIPVS reads a kernel service's destinations.
func realsFromIPVS(dests []ipvs.Destination) Reals {
	reals := make([]RealServer, len(dests))
	for i, dst := range dests {
		reals[i] = realFromIPVS(dst)
	}
	return newReals(reals)
}

func realFromIPVS(d ipvs.Destination) RealServer {
	return RealServer{
		RealKey:       RealKey{Addr: d.Addr.Unmap(), Port: d.Port},
		Weight:        d.Weight,
		ActiveConns:   d.ActiveConnections,
		InactiveConns: d.InactiveConnections,
	}
}

func (s SetSpec) ipset() ipset.Set {
	set := ipset.Set{Name: s.Name, Type: ipset.Type(s.Type), HashSize: s.HashSize, MaxElem: s.MaxElem}
	switch {
	case s.Type == BitmapPort:
		set.PortFrom, set.PortTo, set.HashSize, set.MaxElem = 0, 65535, 0, 0
	case s.IPv6:
		set.Family = ipset.IPv6
	default:
		set.Family = ipset.IPv4
	}
	return set
}

// flushFilter is the conntrack filter of a FlushConntrack operation.
func (o FlushConntrack) flushFilter() conntrack.Filter {
	if o.Real.Addr.IsValid() {
		return conntrack.ByEndpoint(o.Protocol.conntrack(), netip.AddrPortFrom(o.Addr, o.Port), netip.AddrPortFrom(o.Real.Addr, o.Real.Port))
	}
	return conntrack.ByDestination(o.Protocol.conntrack(), o.Addr, o.Port)
}
