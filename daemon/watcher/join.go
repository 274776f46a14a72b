package watcher

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
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
	for i, sp := range ports {
		if eps, ok := shared(sp, from); ok {
			sp.Endpoints = eps
			out[i] = sp
			continue
		}
		type key struct {
			addr netip.Addr
			port uint16
		}
		seen := map[key]int{}
		n := 0
		for _, s := range from {
			n += len(s.endpoints)
		}
		// At most every endpoint once, sized so as not to hold the
		// spare room of appends for as long as the service lives.
		eps := make([]model.Endpoint, 0, n)
		for _, s := range from {
			for _, p := range s.ports {
				if p.name != sp.Name.Port || p.protocol != sp.Protocol {
					continue
				}
				for _, ep := range s.endpoints {
					// A slice of a family the service has no cluster IP
					// of is not served, as in kube-proxy's per-family
					// proxiers.
					if !slices.ContainsFunc(sp.ClusterIPs, func(a netip.Addr) bool { return a.Is4() == ep.Addr.Is4() }) {
						continue
					}
					ep.Port = p.port
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
		}
		slices.SortFunc(eps, func(a, b model.Endpoint) int {
			return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port))
		})
		if len(eps) > 0 {
			sp.Endpoints = eps
		}
		out[i] = sp
	}
	return out
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
