package metrics

import (
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// noLocal marks, per family, the service ports whose Local traffic policy
// finds no endpoint on this node while the cluster has some: kube-proxy's
// kubeproxy_sync_proxy_rules_no_local_endpoints_total counts their
// services.
type noLocal uint8

const (
	noLocalInternal4 noLocal = 1 << iota
	noLocalInternal6
	noLocalExternal4
	noLocalExternal6
)

// noLocalTracker keeps the marks of the service ports that have any, so
// that a sync of a few changes costs a few updates.
type noLocalTracker map[model.ServicePortName]noLocal

// classify works out a service port's marks as kube-proxy's IPVS mode
// does: an endpoint counts when ready, or serving and terminating; a
// family with such endpoints but none on this node is marked for each
// policy that is Local.
func classify(p *model.ServicePort, node string) noLocal {
	if p.InternalPolicy != model.PolicyLocal && p.ExternalPolicy != model.PolicyLocal {
		return 0
	}
	var anyEP, local inet.PerFamily[bool]
	for _, ep := range p.Endpoints {
		if !ep.Ready && !(ep.Serving && ep.Terminating) {
			continue
		}
		f := inet.FamilyOf(ep.Addr.Unmap())
		*anyEP.Of(f) = true
		*local.Of(f) = local.Get(f) || ep.NodeName == node
	}
	var m noLocal
	// Each policy's IPv6 bit follows its IPv4 one, in Families' order.
	for shift, f := range inet.Families() {
		if !anyEP.Get(f) || local.Get(f) {
			continue
		}
		if p.InternalPolicy == model.PolicyLocal {
			m |= noLocalInternal4 << shift
		}
		if p.ExternalPolicy == model.PolicyLocal {
			m |= noLocalExternal4 << shift
		}
	}
	return m
}

// set records a service port's marks; nil removes it.
func (t noLocalTracker) set(name model.ServicePortName, p *model.ServicePort, node string) {
	var m noLocal
	if p != nil {
		m = classify(p, node)
	}
	if m == 0 {
		delete(t, name)
	} else {
		t[name] = m
	}
}

// counts returns how many services (not ports) carry each mark.
func (t noLocalTracker) counts() map[noLocal]int {
	seen := map[noLocal]map[[2]string]bool{}
	for name, m := range t {
		svc := [2]string{name.Namespace, name.Name}
		for bit := noLocalInternal4; bit <= noLocalExternal6; bit <<= 1 {
			if m&bit != 0 {
				if seen[bit] == nil {
					seen[bit] = map[[2]string]bool{}
				}
				seen[bit][svc] = true
			}
		}
	}
	out := map[noLocal]int{}
	for bit, svcs := range seen {
		out[bit] = len(svcs)
	}
	return out
}

// observeNoLocal sets the gauge from the tracker.
func (m *Metrics) observeNoLocal(t noLocalTracker) {
	c := t.counts()
	for bit, labels := range map[noLocal][2]string{
		noLocalInternal4: {"internal", "IPv4"}, noLocalInternal6: {"internal", "IPv6"},
		noLocalExternal4: {"external", "IPv4"}, noLocalExternal6: {"external", "IPv6"},
	} {
		if m.runs(labels[1]) {
			m.noLocalEndpoints.WithLabelValues(labels[0], labels[1]).Set(float64(c[bit]))
		}
	}
}
