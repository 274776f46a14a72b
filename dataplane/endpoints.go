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
		cluster = slices.DeleteFunc(cluster, func(ep Endpoint) bool { return !slices.Contains(ep.ZoneHints, n.Zone) })
	}
	local = pick(eps, isLocal)
	return cluster, local
}

// pick returns the ready endpoints that match, or if there are none, the
// serving and terminating ones that match.
func pick(eps []Endpoint, match func(Endpoint) bool) []Endpoint {
	var ready, fallback []Endpoint
	for _, ep := range eps {
		switch {
		case !match(ep):
		case ep.Ready:
			ready = append(ready, ep)
		case ep.Serving && ep.Terminating:
			fallback = append(fallback, ep)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return fallback
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
