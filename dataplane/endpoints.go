package dataplane

import "slices"

// selectEndpoints picks the endpoints traffic may use, as kube-proxy does:
// ready endpoints, or when none is ready, those still serving while they
// terminate (so a rolling update of the last pod does not drop traffic).
// cluster serves a Cluster traffic policy, honouring topology hints; local
// serves a Local one with this node's endpoints only.
func (n *Node) selectEndpoints(eps []Endpoint) (cluster, local []Endpoint) {
	isLocal := func(ep Endpoint) bool { return n.Name != "" && ep.NodeName == n.Name }
	cluster = pick(eps, func(ep Endpoint) bool { return true })
	if n.canUseZoneHints(cluster) {
		cluster = slices.DeleteFunc(slices.Clone(cluster), func(ep Endpoint) bool { return !slices.Contains(ep.ZoneHints, n.Zone) })
	}
	local = pick(eps, isLocal)
	return cluster, local
}

// pick returns the ready endpoints that match, or if there are none, the
// serving and terminating ones that match. When all of eps are ready and
// match, as they mostly are, it returns eps itself; callers must not
// change what it returns.
func pick(eps []Endpoint, match func(Endpoint) bool) []Endpoint {
	ready, fallback := 0, 0
	for _, ep := range eps {
		switch {
		case !match(ep):
		case ep.Ready:
			ready++
		case ep.Serving && ep.Terminating:
			fallback++
		}
	}
	if ready == len(eps) {
		return eps
	}
	keep := func(ep Endpoint) bool { return match(ep) && ep.Ready }
	n := ready
	if ready == 0 {
		keep = func(ep Endpoint) bool { return match(ep) && ep.Serving && ep.Terminating }
		n = fallback
	}
	picked := make([]Endpoint, 0, n)
	for _, ep := range eps {
		if keep(ep) {
			picked = append(picked, ep)
		}
	}
	return picked
}

// canUseZoneHints reports whether topology-aware routing applies: every
// chosen endpoint carries zone hints and at least one names this node's
// zone. Otherwise hints are ignored, so a half-hinted slice never strands
// traffic.
func (n *Node) canUseZoneHints(eps []Endpoint) bool {
	if n.Zone == "" || len(eps) == 0 {
		return false
	}
	matched := false
	for _, ep := range eps {
		if len(ep.ZoneHints) == 0 {
			return false
		}
		if slices.Contains(ep.ZoneHints, n.Zone) {
			matched = true
		}
	}
	return matched
}
