package watcher

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// join gives each service port the endpoints of the service's slices
// whose port has the same name and protocol. Slices are read in the order
// given; an endpoint (address and port) listed twice, as happens while it
// moves between slices, is taken once, as kube-proxy's EndpointSliceCache
// takes it: a later copy replaces an earlier one unless it is
// terminating. (kube-proxy reads the slices in map order, so which of two
// copies in different slices it keeps is chance; here it is the one of
// the slice whose name sorts last.)
func join(ports []model.ServicePort, from []*sliceInfo) []model.ServicePort {
	out := make([]model.ServicePort, len(ports))
	// The slices' ports by name and protocol, so that each service port
	// reads only its own: a Service of many ports and many slices of one
	// port each costs what its endpoints number, not their product.
	var byPort map[portKey][]slicePortRef
	if len(from) > 1 || len(ports) > 1 {
		byPort = map[portKey][]slicePortRef{}
		for _, s := range from {
			for _, p := range s.ports {
				k := portKey{p.name, p.protocol}
				byPort[k] = append(byPort[k], slicePortRef{s, p.port})
			}
		}
	}
	for i, sp := range ports {
		if eps, ok := shared(sp, from); ok {
			sp.Endpoints = eps
		} else {
			sp.Endpoints = joinPort(sp, portRefs(byPort, from, sp))
		}
		out[i] = sp
	}
	return out
}

// portKey is what joins a slice's port to a service port.
type portKey struct {
	name     string
	protocol inet.Protocol
}

// slicePortRef is one port of one slice.
type slicePortRef struct {
	slice *sliceInfo
	port  uint16
}

// portRefs returns the slices' ports that join service port sp, in the
// slices' order: from byPort, or, when it was not made (at most one
// slice and one service port), from the slice.
func portRefs(byPort map[portKey][]slicePortRef, from []*sliceInfo, sp model.ServicePort) []slicePortRef {
	if byPort != nil || len(from) == 0 {
		return byPort[portKey{sp.Name.Port, sp.Protocol}]
	}
	var refs []slicePortRef
	for _, p := range from[0].ports {
		if p.name == sp.Name.Port && p.protocol == sp.Protocol {
			refs = append(refs, slicePortRef{from[0], p.port})
		}
	}
	return refs
}

// joinPort returns the endpoints of a service port from the slice ports
// that join it, each endpoint once (see join), sorted; nil for none.
func joinPort(sp model.ServicePort, refs []slicePortRef) []model.Endpoint {
	type key struct {
		addr netip.Addr
		port uint16
	}
	n := 0
	for _, r := range refs {
		n += len(r.slice.endpoints)
	}
	if n == 0 {
		return nil
	}
	seen := make(map[key]int, n)
	// At most every endpoint once, sized so as not to hold the spare
	// room of appends for as long as the service lives.
	eps := make([]model.Endpoint, 0, n)
	for _, r := range refs {
		for _, ep := range r.slice.endpoints {
			// A slice of a family the service has no cluster IP of is
			// not served, as in kube-proxy's per-family proxiers.
			if !slices.ContainsFunc(sp.ClusterIPs, func(a netip.Addr) bool { return a.Is4() == ep.Addr.Is4() }) {
				continue
			}
			ep.Port = r.port
			k := key{ep.Addr, ep.Port}
			if j, ok := seen[k]; ok {
				if !ep.Terminating {
					eps[j] = ep
				}
				continue
			}
			seen[k] = len(eps)
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return nil
	}
	slices.SortFunc(eps, func(a, b model.Endpoint) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
	})
	return eps
}

// shared returns, when the service port's endpoints are exactly those of
// its one slice (see sliceInfo.shareable), that slice's endpoints, which
// both then hold: a hundred thousand endpoints are kept once, not twice.
func shared(sp model.ServicePort, from []*sliceInfo) ([]model.Endpoint, bool) {
	if len(from) != 1 || !from[0].shareable || len(from[0].endpoints) == 0 {
		return nil, false
	}
	s := from[0]
	if p := s.ports[0]; p.name != sp.Name.Port || p.protocol != sp.Protocol {
		return nil, false
	}
	ipv4 := s.endpoints[0].Addr.Is4()
	if !slices.ContainsFunc(sp.ClusterIPs, func(a netip.Addr) bool { return a.Is4() == ipv4 }) {
		return nil, false
	}
	return s.endpoints, true
}
