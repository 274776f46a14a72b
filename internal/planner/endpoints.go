package planner

import (
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// endpointsByPolicy returns the endpoints, per family, that traffic from
// inside the cluster and from outside it may use. Each family is selected
// on its own (selectFamily), as kube-proxy runs a proxier per family;
// then each traffic policy takes its list. The lists may share the
// port's array of endpoints; callers must not change them.
//
// An external policy Local with no local endpoint of a family falls back
// to the cluster's endpoints, as kube-proxy's IPVS mode does
// (kubernetes#97081), so that the node's pods still reach the service's
// node ports and external addresses; an internal policy Local drops
// instead (docs/differences-from-kube-proxy.md).
func endpointsByPolicy(n *model.Node, s *model.ServicePort) (internal, external inet.PerFamily[[]model.Endpoint]) {
	all := byFamily(s.Endpoints)
	for _, f := range inet.Families() {
		cluster, local := selectFamily(n, all.Get(f))
		*internal.Of(f), *external.Of(f) = cluster, cluster
		if s.InternalPolicy == model.PolicyLocal {
			*internal.Of(f) = local
		}
		if s.ExternalPolicy == model.PolicyLocal && len(local) > 0 {
			*external.Of(f) = local
		}
	}
	return internal, external
}

// selectFamily is kube-proxy's CategorizeEndpoints for the endpoints of
// one family. The Cluster policy uses the ready endpoints the topology
// hints give this node, or when none is ready anywhere, those still
// serving while they terminate (so a rolling update of the last pod does
// not drop traffic), hints ignored. The Local policy uses this node's
// ready endpoints, or when it has none, its serving and terminating ones.
func selectFamily(n *model.Node, eps []model.Endpoint) (cluster, local []model.Endpoint) {
	topo := topology(n, eps)
	cluster = pick(eps, func(ep model.Endpoint) bool { return ep.Ready && hinted(n, topo, ep) })
	if len(cluster) == 0 {
		cluster = pick(eps, servingTerminating)
	}
	local = pick(eps, func(ep model.Endpoint) bool { return ep.Ready && isLocal(n, ep) })
	if len(local) == 0 {
		local = pick(eps, func(ep model.Endpoint) bool { return servingTerminating(ep) && isLocal(n, ep) })
	}
	return cluster, local
}

func servingTerminating(ep model.Endpoint) bool { return ep.Serving && ep.Terminating }

func isLocal(n *model.Node, ep model.Endpoint) bool { return n.Name != "" && ep.NodeName == n.Name }

// pick returns the endpoints that match: eps itself when all do, as they
// mostly do, and nil when none does.
func pick(eps []model.Endpoint, match func(model.Endpoint) bool) []model.Endpoint {
	count := 0
	for _, ep := range eps {
		if match(ep) {
			count++
		}
	}
	switch count {
	case len(eps):
		return eps
	case 0:
		return nil
	}
	picked := make([]model.Endpoint, 0, count)
	for _, ep := range eps {
		if match(ep) {
			picked = append(picked, ep)
		}
	}
	return picked
}

// byFamily splits endpoints by family. Endpoints with the IPv4 ones
// first, as the watcher sorts them, are split without a copy.
func byFamily(eps []model.Endpoint) (fams inet.PerFamily[[]model.Endpoint]) {
	is6 := func(ep model.Endpoint) bool { return ep.Addr.Unmap().Is6() }
	i := slices.IndexFunc(eps, is6)
	switch {
	case i < 0:
		*fams.Of(inet.IPv4) = eps
	case !slices.ContainsFunc(eps[i:], func(ep model.Endpoint) bool { return !is6(ep) }):
		*fams.Of(inet.IPv4), *fams.Of(inet.IPv6) = eps[:i], eps[i:]
	default:
		for _, ep := range eps {
			of := fams.Of(inet.FamilyOf(ep.Addr.Unmap()))
			*of = append(*of, ep)
		}
	}
	return fams
}

// topologyMode is how topology hints narrow a service's endpoints on this
// node.
type topologyMode uint8

const (
	topologyNone topologyMode = iota
	topologySameZone
	topologySameNode
)

// topology decides from the ready endpoints' hints, as kube-proxy's
// topologyModeFromHints does: node hints when every ready endpoint has
// some and one names this node, else zone hints when every ready endpoint
// has some and one names this node's zone, else none. So a half-hinted
// slice never strands traffic.
func topology(n *model.Node, eps []model.Endpoint) topologyMode {
	ready, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, ep := range eps {
		if !ep.Ready {
			continue
		}
		ready = true
		var h model.Hints
		if ep.Hints != nil {
			h = *ep.Hints
		}
		if len(h.ForNodes) == 0 {
			allNode = false
		} else if n.Name != "" && slices.Contains(h.ForNodes, n.Name) {
			forNode = true
		}
		if len(h.ForZones) == 0 {
			allZone = false
		} else if n.Zone != "" && slices.Contains(h.ForZones, n.Zone) {
			forZone = true
		}
	}
	switch {
	case !ready:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

// hinted reports whether an endpoint serves this node under a topology
// mode.
func hinted(n *model.Node, mode topologyMode, ep model.Endpoint) bool {
	switch mode {
	case topologySameNode:
		return ep.Hints != nil && slices.Contains(ep.Hints.ForNodes, n.Name)
	case topologySameZone:
		return ep.Hints != nil && slices.Contains(ep.Hints.ForZones, n.Zone)
	}
	return true
}
