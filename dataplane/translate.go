package dataplane

import (
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Translations between the plan's values and the kernel packages': what
// truly differs between them (flag bits, kernel-only fields, unmapped
// addresses). Families and protocols are the same inet values on both
// sides.

func ipvsService(v plan.VirtualServer) ipvs.Service {
	s := ipvs.Service{Protocol: v.Protocol, Addr: v.Addr, Port: v.Port, Scheduler: ipvs.Scheduler(v.Scheduler)}
	s.Flags |= ipvsSchedulerFlags(v.SchedulerFlags)
	if v.Persistence > 0 {
		s.Flags |= ipvs.Persistent
		s.Timeout = v.Persistence
	}
	return s
}

// kernelSchedulerFlags pairs the numbered scheduler flags with the
// kernel's bits.
var kernelSchedulerFlags = [...]struct {
	flag model.SchedulerFlags
	ipvs ipvs.ServiceFlags
}{{model.SchedFlag1, ipvs.SHFallback}, {model.SchedFlag2, ipvs.SHPort}, {model.SchedFlag3, ipvs.Sched3}}

func ipvsSchedulerFlags(f model.SchedulerFlags) ipvs.ServiceFlags {
	var out ipvs.ServiceFlags
	for _, k := range kernelSchedulerFlags {
		if f&k.flag != 0 {
			out |= k.ipvs
		}
	}
	return out
}

func schedulerFlagsFromIPVS(f ipvs.ServiceFlags) model.SchedulerFlags {
	var out model.SchedulerFlags
	for _, k := range kernelSchedulerFlags {
		if f&k.ipvs != 0 {
			out |= k.flag
		}
	}
	return out
}

func ipvsKey(k plan.VirtualKey) ipvs.Service {
	return ipvs.Service{Protocol: k.Protocol, Addr: k.Addr, Port: k.Port}
}

// VirtualKeyOf names a kernel virtual service as the desired state does;
// false for a firewall-mark service or a protocol services do not use,
// which are not ipvsplane's.
func VirtualKeyOf(s ipvs.Service) (plan.VirtualKey, bool) {
	if !model.ServiceProtocol(s.Protocol) || s.FirewallMark != 0 {
		return plan.VirtualKey{}, false
	}
	return plan.VirtualKey{Addr: s.Addr.Unmap(), Port: s.Port, Protocol: s.Protocol}, true
}

// virtualFromIPVS reads a kernel service; see VirtualKeyOf for those that
// are not ipvsplane's.
func virtualFromIPVS(s ipvs.Service) (plan.VirtualServer, bool) {
	k, ok := VirtualKeyOf(s)
	if !ok {
		return plan.VirtualServer{}, false
	}
	v := plan.VirtualServer{
		VirtualKey:     k,
		Scheduler:      string(s.Scheduler),
		SchedulerFlags: schedulerFlagsFromIPVS(s.Flags),
	}
	if s.Flags&ipvs.Persistent != 0 {
		v.Persistence = s.Timeout.Round(time.Second)
	}
	return v, true
}

func ipvsDestination(r plan.RealServer) ipvs.Destination {
	return ipvs.Destination{Addr: r.Addr, Port: r.Port, Forward: ipvs.Masquerade, Weight: r.Weight, Drained: r.Weight == 0}
}

// realsFromIPVS reads a kernel service's destinations.
func realsFromIPVS(dests []ipvs.Destination) plan.Reals {
	reals := make([]plan.RealServer, len(dests))
	for i, dst := range dests {
		reals[i] = realFromIPVS(dst)
	}
	return planner.NewReals(reals)
}

func realFromIPVS(d ipvs.Destination) plan.RealServer {
	return plan.RealServer{
		RealKey:       plan.RealKey{Addr: d.Addr.Unmap(), Port: d.Port},
		Weight:        d.Weight,
		ActiveConns:   d.ActiveConnections,
		InactiveConns: d.InactiveConnections,
	}
}

func ipsetSet(s planner.SetSpec) ipset.Set {
	set := ipset.Set{Name: s.Name, Type: ipset.Type(s.Type), HashSize: s.HashSize, MaxElem: s.MaxElem}
	switch {
	case s.Type == planner.BitmapPort:
		set.PortFrom, set.PortTo, set.HashSize, set.MaxElem = 0, 65535, 0, 0
	case s.Family == inet.IPv6:
		set.Family = inet.IPv6
	default:
		set.Family = inet.IPv4
	}
	return set
}

func ipsetEntry(e plan.Entry) ipset.Entry {
	out := ipset.Entry{Addr: e.Addr, Protocol: e.Protocol, Port: e.Port, Addr2: e.Addr2}
	if net, ok := e.Net2(); ok {
		out.Addr2, out.Net2 = netip.Addr{}, net
	}
	return out
}

func ipsetEntries(entries []plan.Entry) []ipset.Entry {
	out := make([]ipset.Entry, len(entries))
	for i, e := range entries {
		out[i] = ipsetEntry(e)
	}
	return out
}

// entryFromIPSet reads a kernel entry of one of ipvsplane's sets.
func entryFromIPSet(e ipset.Entry) plan.Entry {
	out := plan.Entry{Addr: e.Addr, Protocol: e.Protocol, Port: e.Port, Addr2: e.Addr2}
	if e.Net2.IsValid() {
		out.Addr2, out.Bits2 = e.Net2.Addr(), uint8(e.Net2.Bits())
	}
	return out
}
