package planner

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// contributionOf is what one service port puts into the kernel.
type contribution struct {
	// virtual names each virtual server the port claims once.
	virtual []VirtualServer
	// reals[i] are virtual[i]'s real servers, kinds[i] what made it.
	reals   []Reals
	kinds   []virtualKind
	addrs   []netip.Addr
	entries []setEntry
	// claimed are the set entries that go with one claim, sorted by
	// claim: those of an external IP or a load-balancer address, which
	// the port puts in the sets only while it owns that virtual server.
	// A losing claim on the DNS Service's cluster IP would otherwise
	// mark its traffic for masquerade, or firewall it.
	claimed []claimedEntry
	// drain is the port's drain bound; 0 (or less) keeps the node's.
	drain time.Duration
	// problems are what the port asked for and does not get: a
	// scheduler, flags, settings. They never leave it out.
	problems []error
	// externalKeys are the virtual servers the port's external IPs and
	// load-balancer addresses name, but those the node's settings refuse:
	// whether another program made them decides whether the port gets
	// them.
	externalKeys []VirtualKey
}

// claimedEntry is a set entry that goes with the port's claim on
// virtual[claim].
type claimedEntry struct {
	setEntry
	claim int
}

// claimedEntries returns the entries that go with c's claim i.
func (c *contribution) claimedEntries(i int) []claimedEntry {
	from, _ := slices.BinarySearchFunc(c.claimed, i, func(e claimedEntry, i int) int { return e.claim - i })
	to := from
	for to < len(c.claimed) && c.claimed[to].claim == i {
		to++
	}
	return c.claimed[from:to]
}

// virtualKeys returns the virtual servers c claims, owned or not: all its
// claims but a health-check node port's, which is no virtual server. A
// nil c (a port left out, or unknown) has none.
func (c *contribution) virtualKeys() []VirtualKey {
	if c == nil {
		return nil
	}
	keys := make([]VirtualKey, 0, len(c.virtual))
	for i, v := range c.virtual {
		if c.kinds[i] != kindHealthCheck {
			keys = append(keys, v.VirtualKey)
		}
	}
	return keys
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
	// kindHealthCheck claims a health-check node port on a node address,
	// which the daemon listens on: it never becomes a virtual server, and
	// keeps an external IP or load-balancer address from taking it.
	kindHealthCheck
	kindLoadBalancer
	kindExternalIP
)

// kernelFacts are what the planner learned of the kernel that decides
// what a service port gets.
type kernelFacts struct {
	// lacking holds the schedulers the kernel does not have.
	lacking map[string]error
	// foreign holds the virtual servers another program made (see
	// Planner.SetForeign).
	foreign map[VirtualKey]bool
}

// contributionOf computes the kernel objects of one valid service port;
// facts may be nil.
func contributionOf(n *model.Node, s *model.ServicePort, facts *kernelFacts) *contribution {
	if facts == nil {
		facts = &kernelFacts{}
	}
	return new(contributionScratch).contributionOf(n, s, facts)
}

// contributionScratch holds the slices contributions are built in, kept
// from one service port to the next: each contribution then takes one
// allocation of its exact size per slice, where appending grew them
// step by step (and left them larger than they are, for as long as the
// index keeps them).
type contributionScratch struct {
	virtual []VirtualServer
	reals   []Reals
	kinds   []virtualKind
	addrs   []netip.Addr
	entries []setEntry
	claimed []claimedEntry
}

// contributionOf is the package's contributionOf, built in sc.
func (sc *contributionScratch) contributionOf(n *model.Node, s *model.ServicePort, facts *kernelFacts) *contribution {
	sched, problems := n.Scheduling(s, facts.lacking)
	b := &contributionBuilder{
		contribution: &contribution{
			virtual: sc.virtual[:0], reals: sc.reals[:0], kinds: sc.kinds[:0], addrs: sc.addrs[:0], entries: sc.entries[:0], claimed: sc.claimed[:0],
			drain: s.DrainTimeout, problems: append(problems, badSettings(s)...),
		},
		node:    n,
		svc:     s,
		foreign: facts.foreign,
		sched:   sched,
		fams:    nodeFamilies(n, families(s.ClusterIPs)),
	}
	b.internal, b.external = endpointsByPolicy(n, s)
	b.addClusterIPs()
	b.addLoopBack()
	b.addExternalIPs()
	b.addLoadBalancers()
	b.addHealthCheckNodePort(b.addNodePorts())
	c := b.contribution
	// A port naming one address twice adds to an earlier claim.
	slices.SortStableFunc(c.claimed, func(a, b claimedEntry) int { return a.claim - b.claim })
	sc.virtual, sc.reals, sc.kinds, sc.addrs, sc.entries, sc.claimed = c.virtual, c.reals, c.kinds, c.addrs, c.entries, c.claimed
	c.virtual, c.reals, c.kinds, c.addrs, c.entries, c.claimed = exact(c.virtual), exact(c.reals), exact(c.kinds), exact(c.addrs), exact(c.entries), exact(c.claimed)
	// The scratch's real-server lists belong to the contribution now.
	clear(sc.reals)
	return c
}

// exact returns a copy of s in a slice of its length; nil if s is empty.
func exact[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// contributionBuilder fills the contribution of one service port.
type contributionBuilder struct {
	*contribution
	node *model.Node
	svc  *model.ServicePort
	// foreign holds the virtual servers another program made, which an
	// external IP or load-balancer address does not take.
	foreign map[VirtualKey]bool
	sched   model.SchedulerChoice
	// internal and external are the endpoints, per family, of each
	// traffic policy.
	internal, external inet.PerFamily[[]model.Endpoint]
	// fams are the families the port is served in: like kube-proxy's
	// proxier per family, those it has a cluster IP of.
	fams []inet.Family
	// positions indexes the port's claims once they are many (see
	// virtualIndex).
	positions map[VirtualKey]int
}

// served returns the addresses of addrs in the port's families.
func (b *contributionBuilder) served(addrs []netip.Addr) []netip.Addr {
	return slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return !slices.Contains(b.fams, inet.FamilyOf(a)) })
}

// addVirtual adds a virtual server on addr and port with the endpoints
// of its family from byFamily, and returns the claim's index; bind says
// the address must be on the node.
func (b *contributionBuilder) addVirtual(kind virtualKind, addr netip.Addr, port uint16, byFamily inet.PerFamily[[]model.Endpoint], bind bool) int {
	s := b.svc
	f := inet.FamilyOf(addr)
	k := VirtualKey{Addr: addr, Port: port, Protocol: s.Protocol}
	i := b.virtualIndex(k)
	if i >= 0 {
		// The port names this virtual server again (its node port on an
		// address it lists as external, say): it stays one claim, of
		// the strongest kind named, with the first mention's real
		// servers.
		b.kinds[i] = min(b.kinds[i], kind)
	} else {
		i = len(b.virtual)
		b.addClaim(k, kind, realServers(f, byFamily.Get(f)))
	}
	b.addEntry(model.SetOwned, f, portEntry(addr, s.Protocol, port))
	// An address the node already has elsewhere is local without
	// being bound, and stays out of KUBE-IPVS-IPS.
	if bind && !slices.Contains(localAddrs(b.node), addr) {
		b.addrs = append(b.addrs, addr)
		b.addEntry(model.SetIPVSAddresses, f, Entry{Addr: addr})
	}
	return i
}

// addClaim adds the port's claim on virtual server k.
func (b *contributionBuilder) addClaim(k VirtualKey, kind virtualKind, reals Reals) {
	if b.positions != nil {
		b.positions[k] = len(b.virtual)
	}
	b.virtual = append(b.virtual, VirtualServer{VirtualKey: k, Scheduler: b.sched.Name, SchedulerFlags: b.sched.Flags, Persistence: b.svc.SessionAffinity})
	b.kinds = append(b.kinds, kind)
	b.reals = append(b.reals, reals)
}

// virtualIndex returns where the port claims virtual server k so far, or
// -1. A few claims are searched; a port with many (a tenant may list
// thousands of external IPs) gets a map, so its cost stays linear.
func (b *contributionBuilder) virtualIndex(k VirtualKey) int {
	const searched = 16
	if b.positions == nil {
		if len(b.virtual) < searched {
			return slices.IndexFunc(b.virtual, func(v VirtualServer) bool { return v.VirtualKey == k })
		}
		b.positions = make(map[VirtualKey]int, 2*len(b.virtual))
		for i, v := range b.virtual {
			b.positions[v.VirtualKey] = i
		}
	}
	if i, ok := b.positions[k]; ok {
		return i
	}
	return -1
}

// addEntry adds e to the family's set of the name.
func (b *contributionBuilder) addEntry(set string, f inet.Family, e Entry) {
	b.entries = append(b.entries, setEntry{Set: model.SetName(set, f), Entry: e})
}

// addClaimedEntry adds e to the family's set of the name while the port
// owns the virtual server of its claim.
func (b *contributionBuilder) addClaimedEntry(claim int, set string, f inet.Family, e Entry) {
	b.claimed = append(b.claimed, claimedEntry{setEntry{Set: model.SetName(set, f), Entry: e}, claim})
}

func (b *contributionBuilder) addClusterIPs() {
	s := b.svc
	for _, ip := range b.served(s.ClusterIPs) {
		b.addVirtual(kindClusterIP, ip, s.Port, b.internal, true)
		b.addEntry(model.SetClusterIP, inet.FamilyOf(ip), portEntry(ip, s.Protocol, s.Port))
	}
}

// addLoopBack adds the port's endpoints on this node, so that one sent
// its own connection through the service is masqueraded (hairpin).
func (b *contributionBuilder) addLoopBack() {
	s := b.svc
	for _, ep := range s.Endpoints {
		if ip := ep.Addr.Unmap(); b.node.Name != "" && ep.NodeName == b.node.Name && slices.Contains(b.fams, inet.FamilyOf(ip)) {
			b.addEntry(model.SetLoopBack, inet.FamilyOf(ip), Entry{Addr: ip, Protocol: s.Protocol, Port: ep.Port, Addr2: ip})
		}
	}
}

// addExternalIPs adds the port's external IPs but those outside the
// node's ranges, those on a protected port of its own addresses and
// those at another program's virtual server, each kind reported once.
func (b *contributionBuilder) addExternalIPs() {
	s := b.svc
	var outside, protected, foreign refusal
	for _, ip := range b.served(s.ExternalIPs) {
		switch {
		case !externalIPAllowed(b.node, ip):
			outside.add(ip)
			continue
		case b.protected(ip):
			protected.add(ip)
			continue
		case b.isForeign(ip):
			foreign.add(ip)
			continue
		}
		claim := b.addVirtual(kindExternalIP, ip, s.Port, b.external, true)
		set := model.SetExternalIP
		if s.ExternalPolicy == model.PolicyLocal {
			set = model.SetExternalIPLocal
		}
		b.addClaimedEntry(claim, set, inet.FamilyOf(ip), portEntry(ip, s.Protocol, s.Port))
	}
	b.report(model.FieldExternalIPs, outside, "outside the node's external-IP ranges (--external-ip-ranges)")
	b.reportProtected(model.FieldExternalIPs, protected)
	b.report(model.FieldExternalIPs, foreign, foreignReason)
}

// addLoadBalancers adds the port's load-balancer addresses but those on
// a protected port of the node's own addresses and those at another
// program's virtual server.
func (b *contributionBuilder) addLoadBalancers() {
	var protected, foreign refusal
	for _, ip := range b.served(b.svc.LoadBalancerIPs) {
		switch {
		case b.protected(ip):
			protected.add(ip)
		case b.isForeign(ip):
			foreign.add(ip)
		default:
			b.addLoadBalancer(ip)
		}
	}
	b.reportProtected(model.FieldLoadBalancerIPs, protected)
	b.report(model.FieldLoadBalancerIPs, foreign, foreignReason)
}

// isForeign reports whether the port's virtual server on ip is another
// program's (keepalived's, kube-vip's), which an external IP or a
// load-balancer address never adopts: its real servers would be
// replaced, and it would be deleted with the Service. The port records
// the virtual server, so the planner knows whom a change concerns.
func (b *contributionBuilder) isForeign(ip netip.Addr) bool {
	k := VirtualKey{Addr: ip, Port: b.svc.Port, Protocol: b.svc.Protocol}
	b.externalKeys = append(b.externalKeys, k)
	return b.foreign[k]
}

// foreignReason is why a port does not get another program's virtual
// server.
const foreignReason = "another program's virtual server (keepalived's, kube-vip's) holds its address and port on this node; ipvsplane neither adopts nor deletes it"

// externalIPAllowed reports whether the node serves external IP ip: its
// ExternalIPRanges hold it, or are empty.
func externalIPAllowed(n *model.Node, ip netip.Addr) bool {
	return len(n.ExternalIPRanges) == 0 || slices.ContainsFunc(n.ExternalIPRanges, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// protected reports whether the port's virtual server on ip would take
// a port the node keeps for its own programs: ip is one of the node's own
// addresses, and the port is among its ProtectedPorts.
func (b *contributionBuilder) protected(ip netip.Addr) bool {
	p := model.ProtectedPort{Protocol: b.svc.Protocol, Port: b.svc.Port}
	return slices.Contains(b.node.ProtectedPorts, p) && slices.Contains(localAddrs(b.node), ip)
}

// reportProtected adds a problem for the addresses of field that r
// gathered on a protected port, if any.
func (b *contributionBuilder) reportProtected(field string, r refusal) {
	if r.n > 0 {
		b.report(field, r, fmt.Sprintf("a node address, whose port %d/%s is kept for the node's own programs (--protected-ports)", b.svc.Port, b.svc.Protocol))
	}
}

// refusal gathers the addresses of one field that a port does not get
// for one reason, to report them once: a tenant may list thousands.
type refusal struct {
	first netip.Addr
	n     int
}

func (r *refusal) add(ip netip.Addr) {
	if r.n == 0 {
		r.first = ip
	}
	r.n++
}

// report adds a problem for the addresses of field that r gathered, if any.
func (b *contributionBuilder) report(field string, r refusal, reason string) {
	if r.n == 0 {
		return
	}
	value := r.first.String()
	if r.n > 1 {
		value += fmt.Sprintf(" and %d more", r.n-1)
	}
	b.problems = append(b.problems, &model.SettingError{Service: b.svc.Name, Field: field, Value: value, Reason: reason})
}

// addLoadBalancer adds one load-balancer address, with the source ranges
// that may reach it.
func (b *contributionBuilder) addLoadBalancer(ip netip.Addr) {
	s := b.svc
	claim := b.addVirtual(kindLoadBalancer, ip, s.Port, b.external, true)
	e := portEntry(ip, s.Protocol, s.Port)
	f := inet.FamilyOf(ip)
	b.addClaimedEntry(claim, model.SetLoadBalancer, f, e)
	if s.ExternalPolicy == model.PolicyLocal {
		b.addClaimedEntry(claim, model.SetLoadBalancerLocal, f, e)
	}
	ranges := sourceRanges(s.LoadBalancerSourceRanges, f)
	if len(ranges) == 0 {
		return
	}
	b.addClaimedEntry(claim, model.SetLoadBalancerFW, f, e)
	allowFromNode := false
	for _, src := range ranges {
		net := e
		net.Addr2, net.Bits2 = src.Masked().Addr(), uint8(src.Bits())
		b.addClaimedEntry(claim, model.SetLoadBalancerSourceNet, f, net)
		allowFromNode = allowFromNode || src.Contains(primaryIP(b.node, f))
	}
	// Traffic from the node itself to its load balancer address loops
	// back without leaving the node; let it through when the node is
	// inside an allowed range.
	if allowFromNode {
		self := e
		self.Addr2 = ip
		b.addClaimedEntry(claim, model.SetLoadBalancerSourceIP, f, self)
	}
}

// addNodePorts adds the port's node port, if it has one, and returns the
// families its health-check node port is in.
func (b *contributionBuilder) addNodePorts() []inet.Family {
	s := b.svc
	if s.NodePort == 0 {
		return b.fams
	}
	nodeAddrs := b.served(nodePortIPs(b.node))
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

func (b *contributionBuilder) addHealthCheckNodePort(fams []inet.Family) {
	port := b.svc.HealthCheckNodePort
	if port == 0 {
		return
	}
	for _, fam := range fams {
		b.addEntry(model.SetHealthCheckNodePort, fam, Entry{Port: port})
	}
	// The daemon listens on the port in each family the node serves,
	// whatever the Service's (HealthCheckAddresses): it is the daemon's
	// on every node address.
	for _, ip := range localAddrs(b.node) {
		if ip.Is6() && b.node.IPv4Only {
			continue
		}
		k := VirtualKey{Addr: ip, Port: port, Protocol: inet.TCP}
		if i := b.virtualIndex(k); i >= 0 {
			b.kinds[i] = min(b.kinds[i], kindHealthCheck)
		} else {
			b.addClaim(k, kindHealthCheck, nil)
		}
	}
}

// badSettings reports the settings the source could not read.
func badSettings(s *model.ServicePort) []error {
	var errs []error
	for _, b := range s.BadSettings {
		errs = append(errs, &model.SettingError{Service: s.Name, Field: b.Field, Value: b.Value, Reason: b.Reason})
	}
	return errs
}

// sourceRanges returns a load balancer's source ranges of one family, as
// kube-proxy reads them: none of the family leaves it unrestricted, and so
// does a range of prefix length 0 among them (kubernetes#132722), which a
// hash:ip,port,net set could not hold anyway.
func sourceRanges(all []netip.Prefix, f inet.Family) []netip.Prefix {
	var ranges []netip.Prefix
	for _, src := range all {
		if inet.FamilyOf(src.Addr()) != f {
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
func nodePortEntries(s *model.ServicePort, nodeAddrs []netip.Addr, fams []inet.Family, entry func(set string, f inet.Family, e Entry)) {
	local := s.ExternalPolicy == model.PolicyLocal
	// An ExternalPolicy Local port is in both sets; the rules look at the
	// -LOCAL set first and skip masquerade for it.
	switch s.Protocol {
	case inet.TCP, inet.UDP:
		set, localSet := model.SetNodePortTCP, model.SetNodePortLocalTCP
		if s.Protocol == inet.UDP {
			set, localSet = model.SetNodePortUDP, model.SetNodePortLocalUDP
		}
		for _, fam := range fams {
			entry(set, fam, Entry{Port: s.NodePort})
			if local {
				entry(localSet, fam, Entry{Port: s.NodePort})
			}
		}
	case inet.SCTP:
		for _, ip := range nodeAddrs {
			entry(model.SetNodePortSCTP, inet.FamilyOf(ip), portEntry(ip, inet.SCTP, s.NodePort))
			if local {
				entry(model.SetNodePortLocalSCTP, inet.FamilyOf(ip), portEntry(ip, inet.SCTP, s.NodePort))
			}
		}
	}
}

// realServers returns the chosen endpoints of one family as real servers
// of weight 1. Endpoints that are no longer chosen drain at weight 0 before
// they are deleted (see Diff).
func realServers(f inet.Family, chosen []model.Endpoint) Reals {
	reals := make([]RealServer, 0, len(chosen))
	for _, ep := range chosen {
		if ip := ep.Addr.Unmap(); inet.FamilyOf(ip) == f {
			reals = append(reals, RealServer{RealKey: RealKey{Addr: ip, Port: ep.Port}, Weight: 1})
		}
	}
	return NewReals(reals)
}

// nodeFamilies returns the families of fams the node serves: IPv4 alone
// on an IPv4Only node.
func nodeFamilies(n *model.Node, fams []inet.Family) []inet.Family {
	if n.IPv4Only {
		return slices.DeleteFunc(fams, func(f inet.Family) bool { return f == inet.IPv6 })
	}
	return fams
}

// families returns the families of addrs, IPv4 first.
func families(addrs []netip.Addr) []inet.Family {
	var fams []inet.Family
	for _, f := range inet.Families() {
		for _, a := range addrs {
			if inet.FamilyOf(a) == f {
				fams = append(fams, f)
				break
			}
		}
	}
	return fams
}

// ConflictError reports a service port that claims a virtual server
// another service port has: the rest of the port is programmed, and the
// virtual server stays the other's. The owner is chosen whatever the order
// of the input: by what made each port claim it (a cluster IP before a
// node port, a health-check node port on a node address, which keeps the
// daemon's listener and is no virtual server, a load-balancer address and
// an external IP, in that order), then the API server's own service, then
// the name.
type ConflictError struct {
	Service model.ServicePortName
	Virtual VirtualKey
	Owner   model.ServicePortName
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("service %s: virtual server %s is served by %s, which claims it first; the rest of %s is programmed", e.Service, e.Virtual, e.Owner, e.Service)
}
