package dataplane

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// contribution is what one service port puts into the kernel.
type contribution struct {
	virtual []VirtualServer
	// reals[i] are virtual[i]'s real servers, kinds[i] what made it.
	reals   []Reals
	kinds   []virtualKind
	addrs   []netip.Addr
	entries []SetEntry
	// drain is the port's drain bound; 0 (or less) keeps the node's.
	drain time.Duration
	// problems are what the port asked for and does not get: a
	// scheduler, flags, settings. They never leave it out.
	problems []error
}

// virtualKind says what address a virtual server serves. When two service
// ports claim one virtual server, the kind decides first: cluster IPs and
// node ports are allocated by the API server, load-balancer addresses by
// a controller, and external IPs by anyone who may create a Service, so a
// Service naming another's cluster IP as its external IP cannot take it.
type virtualKind uint8

const (
	kindClusterIP virtualKind = iota
	kindNodePort
	kindLoadBalancer
	kindExternalIP
)

// contribution computes the kernel objects of one valid service port;
// lacking holds the schedulers the kernel does not have.
func (n *Node) contribution(s *ServicePort, lacking map[string]error) *contribution {
	sched, problems := n.scheduling(s, lacking)
	b := &contributionBuilder{
		contribution: &contribution{drain: s.DrainTimeout, problems: append(problems, badSettings(s)...)},
		node:         n,
		svc:          s,
		sched:        sched,
		fams:         families(s.ClusterIPs),
	}
	b.internal, b.external = n.endpointsByPolicy(s)
	b.addClusterIPs()
	b.addLoopBack()
	b.addExternalIPs()
	for _, ip := range b.served(s.LoadBalancerIPs) {
		b.addLoadBalancer(ip)
	}
	b.addHealthCheckNodePort(b.addNodePorts())
	return b.contribution
}

// endpointsByPolicy returns the endpoints, per family, that traffic from
// inside the cluster and from outside it may use.
func (n *Node) endpointsByPolicy(s *ServicePort) (internal, external [2][]Endpoint) {
	cluster, local := n.selectEndpoints(s.Endpoints)
	internal, external = cluster, cluster
	if s.InternalPolicy == PolicyLocal {
		internal = local
	}
	if s.ExternalPolicy == PolicyLocal {
		external = local
	}
	return internal, external
}

// contributionBuilder fills the contribution of one service port.
type contributionBuilder struct {
	*contribution
	node  *Node
	svc   *ServicePort
	sched schedulerChoice
	// internal and external are the endpoints, per family, of each
	// traffic policy.
	internal, external [2][]Endpoint
	// fams are the families the port is served in: like kube-proxy's
	// proxier per family, those it has a cluster IP of.
	fams []bool
}

// served returns the addresses of addrs in the port's families.
func (b *contributionBuilder) served(addrs []netip.Addr) []netip.Addr {
	return slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return !slices.Contains(b.fams, a.Is6()) })
}

// addVirtual adds a virtual server on addr and port with the endpoints
// of its family from byFamily; bind says the address must be on the node.
func (b *contributionBuilder) addVirtual(kind virtualKind, addr netip.Addr, port uint16, byFamily [2][]Endpoint, bind bool) {
	s := b.svc
	eps := byFamily[family(addr.Is6())]
	k := VirtualKey{Addr: addr, Port: port, Protocol: s.Protocol}
	b.virtual = append(b.virtual, VirtualServer{VirtualKey: k, Scheduler: b.sched.name, SchedulerFlags: b.sched.flags, Persistence: s.SessionAffinity})
	b.kinds = append(b.kinds, kind)
	b.addEntry(SetOwned, addr.Is6(), portEntry(addr, s.Protocol, port))
	b.reals = append(b.reals, realServers(addr.Is6(), eps))
	// An address the node already has elsewhere is local without
	// being bound, and stays out of KUBE-IPVS-IPS.
	if bind && !slices.Contains(b.node.localAddrs(), addr) {
		b.addrs = append(b.addrs, addr)
		b.addEntry(SetIPVSAddresses, addr.Is6(), addr.String())
	}
}

// addEntry adds e to the family's set of the name.
func (b *contributionBuilder) addEntry(set string, ipv6 bool, e string) {
	b.entries = append(b.entries, SetEntry{Set: SetName(set, ipv6), Entry: e})
}

func (b *contributionBuilder) addClusterIPs() {
	s := b.svc
	for _, ip := range s.ClusterIPs {
		b.addVirtual(kindClusterIP, ip, s.Port, b.internal, true)
		b.addEntry(SetClusterIP, ip.Is6(), portEntry(ip, s.Protocol, s.Port))
	}
}

// addLoopBack adds the port's endpoints on this node, so that one sent
// its own connection through the service is masqueraded (hairpin).
func (b *contributionBuilder) addLoopBack() {
	s := b.svc
	for _, ep := range s.Endpoints {
		if b.node.Name != "" && ep.NodeName == b.node.Name {
			ip := ep.Addr.Unmap()
			b.addEntry(SetLoopBack, ip.Is6(), portEntry(ip, s.Protocol, ep.Port)+","+ip.String())
		}
	}
}

func (b *contributionBuilder) addExternalIPs() {
	s := b.svc
	for _, ip := range b.served(s.ExternalIPs) {
		b.addVirtual(kindExternalIP, ip, s.Port, b.external, true)
		set := SetExternalIP
		if s.ExternalPolicy == PolicyLocal {
			set = SetExternalIPLocal
		}
		b.addEntry(set, ip.Is6(), portEntry(ip, s.Protocol, s.Port))
	}
}

// addLoadBalancer adds one load-balancer address, with the source ranges
// that may reach it.
func (b *contributionBuilder) addLoadBalancer(ip netip.Addr) {
	s := b.svc
	b.addVirtual(kindLoadBalancer, ip, s.Port, b.external, true)
	e := portEntry(ip, s.Protocol, s.Port)
	b.addEntry(SetLoadBalancer, ip.Is6(), e)
	if s.ExternalPolicy == PolicyLocal {
		b.addEntry(SetLoadBalancerLocal, ip.Is6(), e)
	}
	ranges := sourceRanges(s.LoadBalancerSourceRanges, ip.Is6())
	if len(ranges) == 0 {
		return
	}
	b.addEntry(SetLoadBalancerFW, ip.Is6(), e)
	allowFromNode := false
	for _, src := range ranges {
		b.addEntry(SetLoadBalancerSourceNet, ip.Is6(), e+","+src.Masked().String())
		for _, a := range b.node.primaryIPs(ip.Is6()) {
			allowFromNode = allowFromNode || src.Contains(a)
		}
	}
	// Traffic from the node itself to its load balancer address loops
	// back without leaving the node; let it through when the node is
	// inside an allowed range.
	if allowFromNode {
		b.addEntry(SetLoadBalancerSourceIP, ip.Is6(), e+","+ip.String())
	}
}

// addNodePorts adds the port's node port, if it has one, and returns the
// families its health-check node port is in.
func (b *contributionBuilder) addNodePorts() []bool {
	s := b.svc
	if s.NodePort == 0 {
		return b.fams
	}
	nodeAddrs := b.served(b.node.nodePortAddresses())
	for _, ip := range nodeAddrs {
		b.addVirtual(kindNodePort, ip, s.NodePort, b.external, false)
	}
	// Like kube-proxy, a family with no node address to serve the node
	// port on gets none of the port's node-port entries, nor its
	// health-check node port (kube-proxy skips the rest of the port).
	fams := families(nodeAddrs)
	nodePortEntries(s, nodeAddrs, fams, b.addEntry)
	return fams
}

func (b *contributionBuilder) addHealthCheckNodePort(fams []bool) {
	if b.svc.HealthCheckNodePort == 0 {
		return
	}
	for _, fam := range fams {
		b.addEntry(SetHealthCheckNodePort, fam, strconv.Itoa(int(b.svc.HealthCheckNodePort)))
	}
}

// schedulerChoice is the scheduler and the kernel's flags a service
// port's virtual servers get.
type schedulerChoice struct {
	name  string
	flags SchedulerFlags
}

// scheduling chooses a service port's scheduler: the one it names when
// the kernel has it, else the node's. A port that names neither scheduler
// nor flags gets the node's defaults; flags the scheduler does not read
// are dropped. What the port does not get is returned, to be reported.
func (n *Node) scheduling(s *ServicePort, lacking map[string]error) (schedulerChoice, []error) {
	node := schedulerChoice{name: n.scheduler(), flags: defaultSchedulerFlags(n.scheduler())}
	if s.Scheduler == "" && s.SchedulerFlags == 0 {
		return node, nil
	}
	name := cmp.Or(s.Scheduler, node.name)
	fallback := func(err error) (schedulerChoice, []error) {
		return node, []error{&SchedulerError{Service: s.Name, Scheduler: name, Fallback: node.name, Err: err}}
	}
	// An unknown name is never tried in the kernel: it would load the
	// module of any name a Service gives.
	if !schedulers[name] {
		return fallback(ErrUnknownScheduler)
	}
	if err := lacking[name]; err != nil {
		return fallback(err)
	}
	kernel, ignored := s.SchedulerFlags.forScheduler(name)
	if ignored == 0 {
		return schedulerChoice{name: name, flags: kernel}, nil
	}
	return schedulerChoice{name: name, flags: kernel}, []error{&SettingError{Service: s.Name, Field: FieldSchedulerFlags,
		Value: ignored.String(), Reason: fmt.Sprintf("the %s scheduler does not read them", name)}}
}

// badSettings reports the settings the source could not read.
func badSettings(s *ServicePort) []error {
	var errs []error
	for _, b := range s.BadSettings {
		errs = append(errs, &SettingError{Service: s.Name, Field: b.Field, Value: b.Value, Reason: b.Reason})
	}
	return errs
}

// sourceRanges returns a load balancer's source ranges of one family, as
// kube-proxy reads them: none of the family leaves it unrestricted, and so
// does a range of prefix length 0 among them (kubernetes#132722), which a
// hash:ip,port,net set could not hold anyway.
func sourceRanges(all []netip.Prefix, ipv6 bool) []netip.Prefix {
	var ranges []netip.Prefix
	for _, src := range all {
		if src.Addr().Is6() != ipv6 {
			continue
		}
		if src.Bits() == 0 {
			return nil
		}
		ranges = append(ranges, src)
	}
	return ranges
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

// nodePortPrefixes returns the prefixes that limit the node-port
// addresses: NodePortAddresses with, for NodePortPrimary, the primary IPs.
func (n *Node) nodePortPrefixes() []netip.Prefix {
	prefixes := n.NodePortAddresses
	if n.NodePortPrimary {
		prefixes = slices.Clone(prefixes)
		for _, ipv6 := range []bool{false, true} {
			for _, a := range n.NodeIPs {
				if a.Is6() == ipv6 && !a.IsLoopback() {
					prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
					break
				}
			}
		}
	}
	return prefixes
}

// nodePortAddresses returns the addresses node ports are served on.
func (n *Node) nodePortAddresses() []netip.Addr {
	prefixes := n.nodePortPrefixes()
	var addrs []netip.Addr
	for _, a := range n.localAddrs() {
		if servesNodePorts(prefixes, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// HealthCheckAddresses returns the addresses health-check node ports
// listen on, IPv4 first, as kube-proxy's service health servers choose
// them per family: the family's unspecified address (0.0.0.0 or ::, every
// address of the family) when its prefixes match all its addresses, else
// each of its node-port addresses and the loopback address if a prefix
// holds it. A family that matches all but has no node-port address has
// none, as it has no node port.
func (n *Node) HealthCheckAddresses() []netip.Addr {
	prefixes := n.nodePortPrefixes()
	served := n.nodePortAddresses()
	var out []netip.Addr
	for _, wildcard := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		var family []netip.Addr
		for _, a := range served {
			if a.Is6() == wildcard.Is6() {
				family = append(family, a)
			}
		}
		if !matchesAll(prefixes, wildcard.Is6()) {
			// Node ports leave loopback out in IPVS mode; kube-proxy's
			// health servers listen on it when a prefix holds it.
			if lo := loopback(wildcard.Is6()); servesNodePorts(prefixes, lo) {
				family = append(family, lo)
			}
			out = append(out, family...)
		} else if len(family) > 0 {
			out = append(out, wildcard)
		}
	}
	return out
}

// loopback returns the loopback address of a family.
func loopback(ipv6 bool) netip.Addr {
	if ipv6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// matchesAll reports whether prefixes leave a family's node-port
// addresses unrestricted: no prefix of the family, or one of length 0.
func matchesAll(prefixes []netip.Prefix, ipv6 bool) bool {
	family := false
	for _, p := range prefixes {
		if p.Addr().Is6() == ipv6 {
			family = true
			if p.Bits() == 0 {
				return true
			}
		}
	}
	return !family
}

// servesNodePorts reports whether node address a serves node ports under
// prefixes, per family as kube-proxy's NodePortAddresses: a family with no
// prefix, or with one of length 0, matches all its addresses.
func servesNodePorts(prefixes []netip.Prefix, a netip.Addr) bool {
	family := false
	for _, p := range prefixes {
		if p.Addr().Is6() != a.Is6() {
			continue
		}
		family = true
		if p.Bits() == 0 || p.Contains(a) {
			return true
		}
	}
	return !family
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

// ConflictError reports a service port that claims a virtual server
// another service port has: the rest of the port is programmed, and the
// virtual server stays the other's (see desiredIndex.better).
type ConflictError struct {
	Service ServicePortName
	Virtual VirtualKey
	Owner   ServicePortName
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("service %s: virtual server %s is served by %s, which claims it first; the rest of %s is programmed", e.Service, e.Virtual, e.Owner, e.Service)
}
