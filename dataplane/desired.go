package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// contribution is what one service port puts into the kernel.
type contribution struct {
	virtual []VirtualServer
	// reals[i] are virtual[i]'s real servers.
	reals   []Reals
	addrs   []netip.Addr
	entries []SetEntry
}

// contribution computes the kernel objects of one valid service port.
func (n *Node) contribution(s *ServicePort) *contribution {
	c := &contribution{}
	cluster, local := n.selectEndpoints(s.Endpoints)
	internal, external := cluster, cluster
	if s.InternalPolicy == PolicyLocal {
		internal = local
	}
	if s.ExternalPolicy == PolicyLocal {
		external = local
	}
	sched := s.Scheduler
	if sched == "" {
		sched = n.scheduler()
	}
	addVirtual := func(addr netip.Addr, port uint16, byFamily [2][]Endpoint, bind bool) {
		eps := byFamily[family(addr.Is6())]
		k := VirtualKey{Addr: addr, Port: port, Protocol: s.Protocol}
		c.virtual = append(c.virtual, VirtualServer{VirtualKey: k, Scheduler: sched, SchedulerPort: sched == "mh", Persistence: s.SessionAffinity})
		c.entries = append(c.entries, SetEntry{Set: SetName(SetOwned, addr.Is6()), Entry: portEntry(addr, s.Protocol, port)})
		c.reals = append(c.reals, realServers(addr.Is6(), eps))
		// An address the node already has elsewhere is local without
		// being bound, and stays out of KUBE-IPVS-IPS.
		if bind && !slices.Contains(n.localAddrs(), addr) {
			c.addrs = append(c.addrs, addr)
			c.entries = append(c.entries, SetEntry{Set: SetName(SetIPVSAddresses, addr.Is6()), Entry: addr.String()})
		}
	}
	entry := func(set string, ipv6 bool, e string) {
		c.entries = append(c.entries, SetEntry{Set: SetName(set, ipv6), Entry: e})
	}
	// Like kube-proxy's proxier per family, a service is served only in
	// the families it has a cluster IP of.
	fams := families(s.ClusterIPs)
	served := func(addrs []netip.Addr) []netip.Addr {
		return slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return !slices.Contains(fams, a.Is6()) })
	}

	for _, ip := range s.ClusterIPs {
		addVirtual(ip, s.Port, internal, true)
		entry(SetClusterIP, ip.Is6(), portEntry(ip, s.Protocol, s.Port))
	}
	for _, ep := range s.Endpoints {
		if n.Name != "" && ep.NodeName == n.Name {
			ip := ep.Addr.Unmap()
			entry(SetLoopBack, ip.Is6(), portEntry(ip, s.Protocol, ep.Port)+","+ip.String())
		}
	}
	for _, ip := range served(s.ExternalIPs) {
		addVirtual(ip, s.Port, external, true)
		set := SetExternalIP
		if s.ExternalPolicy == PolicyLocal {
			set = SetExternalIPLocal
		}
		entry(set, ip.Is6(), portEntry(ip, s.Protocol, s.Port))
	}
	for _, ip := range served(s.LoadBalancerIPs) {
		addVirtual(ip, s.Port, external, true)
		e := portEntry(ip, s.Protocol, s.Port)
		entry(SetLoadBalancer, ip.Is6(), e)
		if s.ExternalPolicy == PolicyLocal {
			entry(SetLoadBalancerLocal, ip.Is6(), e)
		}
		if len(s.LoadBalancerSourceRanges) == 0 {
			continue
		}
		entry(SetLoadBalancerFW, ip.Is6(), e)
		allowFromNode := false
		for _, src := range s.LoadBalancerSourceRanges {
			if src.Addr().Is6() != ip.Is6() {
				continue
			}
			entry(SetLoadBalancerSourceNet, ip.Is6(), e+","+src.Masked().String())
			for _, a := range n.primaryIPs(ip.Is6()) {
				allowFromNode = allowFromNode || src.Contains(a)
			}
		}
		// Traffic from the node itself to its load balancer address loops
		// back without leaving the node; let it through when the node is
		// inside an allowed range.
		if allowFromNode {
			entry(SetLoadBalancerSourceIP, ip.Is6(), e+","+ip.String())
		}
	}
	if s.NodePort != 0 {
		nodeAddrs := served(n.nodePortAddresses())
		for _, ip := range nodeAddrs {
			addVirtual(ip, s.NodePort, external, false)
		}
		nodePortEntries(s, nodeAddrs, fams, entry)
	}
	if s.HealthCheckNodePort != 0 {
		for _, fam := range fams {
			entry(SetHealthCheckNodePort, fam, strconv.Itoa(int(s.HealthCheckNodePort)))
		}
	}
	return c
}

// nodePortEntries fills the node-port sets: a bitmap of ports for TCP and
// UDP, address and port pairs for SCTP (whose packets the bitmap type
// cannot tell apart by protocol).
func nodePortEntries(s *ServicePort, nodeAddrs []netip.Addr, fams []bool, entry func(set string, ipv6 bool, e string)) {
	local := s.ExternalPolicy == PolicyLocal
	// An ExternalPolicy Local port is in both sets; the rules look at the
	// -LOCAL set first and skip masquerade for it.
	switch s.Protocol {
	case TCP, UDP:
		set, localSet := SetNodePortTCP, SetNodePortLocalTCP
		if s.Protocol == UDP {
			set, localSet = SetNodePortUDP, SetNodePortLocalUDP
		}
		for _, fam := range fams {
			entry(set, fam, strconv.Itoa(int(s.NodePort)))
			if local {
				entry(localSet, fam, strconv.Itoa(int(s.NodePort)))
			}
		}
	case SCTP:
		for _, ip := range nodeAddrs {
			entry(SetNodePortSCTP, ip.Is6(), portEntry(ip, SCTP, s.NodePort))
			if local {
				entry(SetNodePortLocalSCTP, ip.Is6(), portEntry(ip, SCTP, s.NodePort))
			}
		}
	}
}

// realServers returns the chosen endpoints of one family as real servers
// of weight 1. Endpoints that are no longer chosen drain at weight 0 before
// they are deleted (see Diff).
func realServers(ipv6 bool, chosen []Endpoint) Reals {
	reals := make([]RealServer, 0, len(chosen))
	for _, ep := range chosen {
		if ip := ep.Addr.Unmap(); ip.Is6() == ipv6 {
			reals = append(reals, RealServer{RealKey: RealKey{Addr: ip, Port: ep.Port}, Weight: 1})
		}
	}
	return newReals(reals)
}

func (n *Node) scheduler() string {
	if n.Scheduler == "" {
		return "rr"
	}
	return n.Scheduler
}

// primaryIPs returns the node's primary IP of a family, as kube-proxy
// takes it from the Node object, or without one every address of the node.
func (n *Node) primaryIPs(ipv6 bool) []netip.Addr {
	for _, a := range n.NodeIPs {
		if a.Is6() == ipv6 {
			return []netip.Addr{a}
		}
	}
	return n.localAddrs()
}

// localAddrs returns the node's addresses, or without them its Node
// object's.
func (n *Node) localAddrs() []netip.Addr {
	if len(n.Addresses) == 0 {
		return n.NodeIPs
	}
	return n.Addresses
}

// nodePortAddresses returns the addresses node ports are served on.
func (n *Node) nodePortAddresses() []netip.Addr {
	if len(n.NodePortAddresses) == 0 {
		return n.localAddrs()
	}
	var addrs []netip.Addr
	for _, a := range n.localAddrs() {
		for _, p := range n.NodePortAddresses {
			if p.Contains(a) {
				addrs = append(addrs, a)
				break
			}
		}
	}
	return addrs
}

// families returns the families of addrs, IPv4 (false) first.
func families(addrs []netip.Addr) []bool {
	var fams []bool
	for _, ipv6 := range []bool{false, true} {
		for _, a := range addrs {
			if a.Is6() == ipv6 {
				fams = append(fams, ipv6)
				break
			}
		}
	}
	return fams
}

// ConflictError reports a service port whose virtual server another
// service port already has.
type ConflictError struct {
	Service ServicePortName
	Virtual VirtualKey
	Owner   ServicePortName
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("service %s: virtual server %s is already served by %s", e.Service, e.Virtual, e.Owner)
}
