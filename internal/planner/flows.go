package planner

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// ReconcileFlows deletes the stale conntrack entries of one family and
// protocol: kube-proxy's conntrack reconciliation (CleanStaleEntries,
// v1.37), whose policy a FlowMatcher holds. A sync runs it after one in
// which the endpoints of a service with a port of that protocol changed
// in that family, and again at every sync until it succeeds.
type ReconcileFlows struct {
	Family   inet.Family
	Protocol inet.Protocol
}

func (o ReconcileFlows) String() string {
	return fmt.Sprintf("conntrack reconcile %s %s", o.Protocol, o.Family)
}

func (ReconcileFlows) phase() phase { return phaseConntrack }

// reconciledProtocols are the protocols whose stale entries are deleted:
// UDP, as kube-proxy does, and SCTP, whose associations a stale entry
// holds on a dead endpoint as well (kubernetes#70020).
var reconciledProtocols = [...]inet.Protocol{inet.UDP, inet.SCTP}

func reconciled(p inet.Protocol) bool { return slices.Contains(reconciledProtocols[:], p) }

// flowIndex keeps, between syncs, what conntrack reconciliation needs of
// every service port, and the reconciliations that changes made due.
type flowIndex struct {
	services map[serviceName]map[string]*flowPort
	due      map[ReconcileFlows]bool
}

// serviceName is a Service's namespace and name: kube-proxy decides by
// Service whether a change calls for a reconciliation.
type serviceName struct{ namespace, name string }

// flowPort is what reconciliation needs of one service port.
type flowPort struct {
	protocol       inet.Protocol
	port, nodePort uint16
	clusterIPs     []netip.Addr
	// frontends are the external and load-balancer addresses.
	frontends []netip.Addr
	serving   []netip.AddrPort
	// endpoints hashes the port's endpoints of each family, 0 for none:
	// a change of either changes it (portHashes).
	endpoints inet.PerFamily[uint64]
}

func newFlowIndex() *flowIndex {
	return &flowIndex{services: map[serviceName]map[string]*flowPort{}, due: map[ReconcileFlows]bool{}}
}

// newFlowPort takes what reconciliation needs of a service port, copied
// (the caller may reuse its model), with the hashes of its endpoints.
func newFlowPort(sp *model.ServicePort, endpoints inet.PerFamily[uint64]) *flowPort {
	fp := &flowPort{protocol: sp.Protocol, port: sp.Port, nodePort: sp.NodePort, endpoints: endpoints}
	if reconciled(sp.Protocol) {
		for i := range sp.Endpoints {
			if ep := &sp.Endpoints[i]; ep.Serving {
				fp.serving = append(fp.serving, netip.AddrPortFrom(ep.Addr, ep.Port))
			}
		}
		fp.clusterIPs = slices.Clone(sp.ClusterIPs)
		fp.frontends = slices.Concat(sp.ExternalIPs, sp.LoadBalancerIPs)
	}
	return fp
}

// update applies changes, of which there is one per port at most, and
// makes due the reconciliations kube-proxy's endpoints change tracker
// calls for: of a family in which the endpoints of a Service changed
// (any of its ports'), for each protocol of which the Service has, or
// had, a port with endpoints in that family. hashes[i] are
// changes[i].Port's (hashPort); a removal's are not read.
func (x *flowIndex) update(changes []model.Change, hashes []portHashes) {
	changed := map[serviceName]inet.PerFamily[bool]{}
	for i, c := range changes {
		svc := serviceName{c.Name.Namespace, c.Name.Name}
		old := x.services[svc][c.Name.Port]
		var now *flowPort
		if c.Port != nil {
			now = newFlowPort(c.Port, hashes[i].endpoints)
		}
		for _, f := range inet.Families() {
			if old.endpointsOf(f) == now.endpointsOf(f) {
				continue
			}
			ch := changed[svc]
			*ch.Of(f) = true
			changed[svc] = ch
			x.makeDue(old, f)
		}
		x.put(svc, c.Name.Port, now)
	}
	for svc, fams := range changed {
		for _, f := range inet.Families() {
			if !fams.Get(f) {
				continue
			}
			for _, fp := range x.services[svc] {
				x.makeDue(fp, f)
			}
		}
	}
}

// endpointsOf returns the hash of a port's endpoints of family f; a nil
// port has none.
func (fp *flowPort) endpointsOf(f inet.Family) uint64 {
	if fp == nil {
		return 0
	}
	return fp.endpoints.Get(f)
}

// makeDue makes due the reconciliation of fp's protocol in family f, if
// fp has endpoints there.
func (x *flowIndex) makeDue(fp *flowPort, f inet.Family) {
	if fp.endpointsOf(f) != 0 && reconciled(fp.protocol) {
		x.due[ReconcileFlows{Family: f, Protocol: fp.protocol}] = true
	}
}

// put stores a service port's record, or removes it when fp is nil.
func (x *flowIndex) put(svc serviceName, port string, fp *flowPort) {
	ports := x.services[svc]
	switch {
	case fp != nil && ports == nil:
		x.services[svc] = map[string]*flowPort{port: fp}
	case fp != nil:
		ports[port] = fp
	default:
		delete(ports, port)
		if len(ports) == 0 {
			delete(x.services, svc)
		}
	}
}

// replace makes the index hold the service ports of a whole model, as
// the changes from what it held; hashes[i] are ports[i]'s (hashPort).
func (x *flowIndex) replace(ports []model.ServicePort, hashes []portHashes) {
	present := make(map[model.ServicePortName]bool, len(ports))
	changes := make([]model.Change, 0, len(ports))
	for i := range ports {
		present[ports[i].Name] = true
		changes = append(changes, model.Change{Name: ports[i].Name, Port: &ports[i]})
	}
	for svc, byName := range x.services {
		for port := range byName {
			if name := (model.ServicePortName{Namespace: svc.namespace, Name: svc.name, Port: port}); !present[name] {
				changes = append(changes, model.Change{Name: name})
			}
		}
	}
	// The removals at the end have no hashes.
	x.update(changes, append(slices.Clip(hashes), make([]portHashes, len(changes)-len(ports))...))
}

// dueNow returns the due reconciliations in order, IPv4 and UDP first,
// leaving out IPv6 on a node that serves IPv4 alone.
func (x *flowIndex) dueNow(ipv4Only bool) []ReconcileFlows {
	out := make([]ReconcileFlows, 0, len(x.due))
	for op := range x.due {
		if !ipv4Only || op.Family == inet.IPv4 {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, func(a, b ReconcileFlows) int {
		return cmp.Or(cmp.Compare(a.Family, b.Family), cmp.Compare(a.Protocol, b.Protocol))
	})
	return out
}

// FlowMatcher holds kube-proxy's conntrack reconciliation policy for one
// family and protocol, over every service port of that protocol with a
// cluster IP of that family: an entry whose original destination is one
// of the port's cluster, external or load-balancer addresses with its
// port, or, while the port has a serving endpoint, its node port on any
// address, is stale unless its replies come from one of the port's
// serving endpoints (ready or not, terminating or not). Traffic
// policies and topology play no part: they change where new flows go,
// not which existing ones live.
type FlowMatcher struct {
	// A flow to a frontend is kept when a port that claims the frontend
	// serves its source. claimants are each frontend's ports, by index
	// (tenants may name one external IP in many Services), servers each
	// endpoint's (a tenant may list one endpoint in many Services); the
	// shorter of a flow's two lists is walked, each step a lookup in the
	// other side's set. A flow costs the fewer of the two, and memory
	// stays the ports' frontends and endpoints, whoever shares them.
	claimants map[netip.AddrPort][]int32
	claims    map[portAddr]struct{}
	servers   map[netip.AddrPort][]int32
	serving   map[portAddr]struct{}
	nodePorts map[uint16]int32
	ports     int32
}

// portAddr is a service port, by index, with one of its frontends or
// serving endpoints.
type portAddr struct {
	port int32
	addr netip.AddrPort
}

// matcher builds the policy of op's family and protocol.
func (x *flowIndex) matcher(op ReconcileFlows) *FlowMatcher {
	m := &FlowMatcher{
		claimants: map[netip.AddrPort][]int32{},
		claims:    map[portAddr]struct{}{},
		servers:   map[netip.AddrPort][]int32{},
		serving:   map[portAddr]struct{}{},
		nodePorts: map[uint16]int32{},
	}
	for _, byName := range x.services {
		for _, fp := range byName {
			cluster := slices.IndexFunc(fp.clusterIPs, func(a netip.Addr) bool { return inet.FamilyOf(a) == op.Family })
			if fp.protocol != op.Protocol || cluster < 0 {
				continue
			}
			m.add(fp, op.Family, fp.clusterIPs[cluster])
		}
	}
	return m
}

// add puts a service port in the matcher.
func (m *FlowMatcher) add(fp *flowPort, fam inet.Family, cluster netip.Addr) {
	i := m.ports
	m.ports++
	serving := false
	for _, ep := range fp.serving {
		if inet.FamilyOf(ep.Addr()) == fam {
			serving = true
			addTo(m.servers, m.serving, portAddr{i, ep})
		}
	}
	for _, a := range slices.Concat([]netip.Addr{cluster}, fp.frontends) {
		if inet.FamilyOf(a) == fam {
			addTo(m.claimants, m.claims, portAddr{i, netip.AddrPortFrom(a, fp.port)})
		}
	}
	// A node port is matched on the port alone, so without a serving
	// endpoint every flow to that port number on any address would go,
	// the node's own among them: kube-proxy leaves it.
	if fp.nodePort != 0 && serving {
		m.nodePorts[fp.nodePort] = i
	}
}

// addTo adds pa to set and its port to lists[pa.addr], once.
func addTo(lists map[netip.AddrPort][]int32, set map[portAddr]struct{}, pa portAddr) {
	if _, dup := set[pa]; !dup {
		set[pa] = struct{}{}
		lists[pa.addr] = append(lists[pa.addr], pa.port)
	}
}

// Stale reports whether the entry whose original destination is dst and
// whose replies come from src is to be deleted.
func (m *FlowMatcher) Stale(dst, src netip.AddrPort) bool {
	if claimants, ok := m.claimants[dst]; ok && !m.anyServes(claimants, dst, src) {
		return true
	}
	i, ok := m.nodePorts[dst.Port()]
	return ok && !m.serves(i, src)
}

// anyServes reports whether one of claimants, the ports that claim dst,
// serves src: it walks whichever is shorter, them or src's ports.
func (m *FlowMatcher) anyServes(claimants []int32, dst, src netip.AddrPort) bool {
	servers := m.servers[src]
	if len(servers) < len(claimants) {
		return slices.ContainsFunc(servers, func(p int32) bool { return has(m.claims, portAddr{p, dst}) })
	}
	return slices.ContainsFunc(claimants, func(p int32) bool { return m.serves(p, src) })
}

// Empty reports whether the matcher holds no service port: no entry is
// stale.
func (m *FlowMatcher) Empty() bool { return len(m.claimants) == 0 }

func (m *FlowMatcher) serves(port int32, src netip.AddrPort) bool {
	return has(m.serving, portAddr{port, src})
}

func has(set map[portAddr]struct{}, pa portAddr) bool {
	_, ok := set[pa]
	return ok
}

// FirstReconciles returns the reconciliations a first sync of state
// runs: those of each family and protocol in which a Service with a port
// of that protocol has endpoints, as kube-proxy's first sync finds every
// Service's endpoints changed.
func FirstReconciles(state *model.State) []ReconcileFlows {
	seed := maphash.MakeSeed()
	hashes := make([]portHashes, len(state.Services))
	for i := range state.Services {
		hashes[i] = hashPort(seed, &state.Services[i])
	}
	x := newFlowIndex()
	x.replace(state.Services, hashes)
	return x.dueNow(state.Node.IPv4Only)
}
