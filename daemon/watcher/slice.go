package watcher

import (
	"errors"
	"fmt"
	"slices"
	"unique"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/sloppy"
	"github.com/ipvsplane/ipvsplane/inet"
)

// LabelServiceName joins an EndpointSlice to its service.
const LabelServiceName = discoveryv1.LabelServiceName

// sliceInfo is what one EndpointSlice says about its service.
type sliceInfo struct {
	// name is the slice's; service names its service.
	name    string
	service string
	ports   []slicePort
	// endpoints have no port yet: each slice port applies to all of them.
	// But a slice of one port (the common case) has its endpoints carry
	// it, sorted by address, and, when no address is listed twice,
	// shareable: a service port joined from this slice alone takes them
	// as they are instead of a copy.
	endpoints []model.Endpoint
	shareable bool
	// family is the family of the slice's addresses.
	family inet.Family
}

type slicePort struct {
	name     string
	protocol inet.Protocol
	port     uint16
}

// sliceFamily is the family of a slice of the address type: IPv6 for
// IPv6 addresses, else IPv4.
func sliceFamily(t discoveryv1.AddressType) inet.Family {
	if t == discoveryv1.AddressTypeIPv6 {
		return inet.IPv6
	}
	return inet.IPv4
}

// convertSlice reads an EndpointSlice, or returns nil for one kube-proxy
// does not use: headless, not joined to a service, or of FQDN addresses.
// As kube-proxy reads a slice's ports and endpoints one by one, a bad one
// is left out alone: the slice is returned with the rest, and the error
// names what was left out.
func convertSlice(s *discoveryv1.EndpointSlice) (*sliceInfo, error) {
	service := s.Labels[LabelServiceName]
	if _, headless := s.Labels[LabelHeadless]; headless || service == "" {
		return nil, nil
	}
	fail := objectError("EndpointSlice", s.Namespace, s.Name)
	if s.Namespace == "" || s.Name == "" {
		return nil, fail("metadata", "namespace and name must be set")
	}
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	case discoveryv1.AddressTypeFQDN:
		return nil, nil
	default:
		return nil, fail("addressType", "unknown address type %q (want IPv4, IPv6 or FQDN)", s.AddressType)
	}
	ports, leftOut := readSlicePorts(s.Ports, fail)
	// Sized exactly: a large cluster holds a hundred thousand endpoints.
	info := &sliceInfo{name: s.Name, service: service, ports: ports, family: sliceFamily(s.AddressType)}
	if len(s.Endpoints) > 0 {
		info.endpoints = make([]model.Endpoint, 0, len(s.Endpoints))
	}
	var hints hintsCache
	for i := range s.Endpoints {
		e, err := readEndpoint(&s.Endpoints[i], i, s.AddressType, &hints, fail)
		if err != nil {
			leftOut = append(leftOut, err)
			continue
		}
		info.endpoints = append(info.endpoints, e)
	}
	if len(info.ports) == 1 {
		info.carryOnlyPort()
	}
	return info, errors.Join(leftOut...)
}

// readSlicePorts returns the ports of a slice that name one; a bad one is
// left out, and the errors name it.
func readSlicePorts(ports []discoveryv1.EndpointPort, fail fieldErrorFunc) ([]slicePort, []error) {
	var out []slicePort
	var leftOut []error
	for i, p := range ports {
		// A port-less entry means "all ports", which a proxy cannot
		// program; kube-proxy skips it too.
		if p.Port == nil {
			continue
		}
		field := fmt.Sprintf("ports[%d]", i)
		if *p.Port < 1 || *p.Port > 65535 {
			leftOut = append(leftOut, fail.leftOut(field+".port", "%d is not from 1 to 65535; the port is left out", *p.Port))
			continue
		}
		sp := slicePort{port: uint16(*p.Port), protocol: inet.TCP}
		if p.Protocol != nil {
			proto, err := protocol(*p.Protocol)
			if err != nil {
				leftOut = append(leftOut, fail.leftOut(field+".protocol", "%v; the port is left out", err))
				continue
			}
			sp.protocol = proto
		}
		if p.Name != nil {
			sp.name = *p.Name
		}
		out = append(out, sp)
	}
	return out, leftOut
}

// readEndpoint reads the i-th endpoint of a slice of an IP address type,
// without its port. Its address is parsed as kube-proxy parses it (see
// parseIPSloppy). An error leaves out this endpoint only.
func readEndpoint(ep *discoveryv1.Endpoint, i int, addressType discoveryv1.AddressType, hints *hintsCache, fail fieldErrorFunc) (model.Endpoint, error) {
	// Only the first address is used: the API keeps the rest for
	// future use.
	if len(ep.Addresses) == 0 {
		return model.Endpoint{}, fail.leftOut(fmt.Sprintf("endpoints[%d].addresses", i), "no address; the endpoint is left out")
	}
	field := fmt.Sprintf("endpoints[%d].addresses[0]", i)
	ip, ok := sloppy.ParseAddr(ep.Addresses[0])
	switch {
	case !ok:
		return model.Endpoint{}, fail.leftOut(field, "%q is not an IP address; the endpoint is left out", ep.Addresses[0])
	case ip.Is4() != (addressType == discoveryv1.AddressTypeIPv4):
		return model.Endpoint{}, fail.leftOut(field, "%s is not of address type %s; the endpoint is left out", ip, addressType)
	// The kernel refuses such a real server (IPVS takes unicast and
	// local destinations only): kube-proxy's sync fails to add it alone.
	case ip.IsUnspecified() || ip.IsMulticast():
		return model.Endpoint{}, fail.leftOut(field, "%s is not a unicast address; the endpoint is left out", ip)
	}
	// As kube-proxy reads the conditions: a nil ready or serving
	// means true, a nil terminating false.
	c := ep.Conditions
	e := model.Endpoint{
		Addr:        ip,
		Ready:       c.Ready == nil || *c.Ready,
		Serving:     c.Serving == nil || *c.Serving,
		Terminating: c.Terminating != nil && *c.Terminating,
	}
	// Node and zone names repeat across a cluster's endpoints: one
	// copy of each.
	if ep.NodeName != nil {
		e.NodeName = unique.Make(*ep.NodeName).Value()
	}
	if ep.Zone != nil {
		e.Zone = unique.Make(*ep.Zone).Value()
	}
	if ep.Hints != nil {
		e.Hints = hints.get(ep.Hints)
	}
	return e, nil
}

// carryOnlyPort gives the endpoints of a slice of one port that port,
// sorts them by address, and marks them shareable when no address is
// listed twice (see sliceInfo.endpoints).
func (info *sliceInfo) carryOnlyPort() {
	for i := range info.endpoints {
		info.endpoints[i].Port = info.ports[0].port
	}
	slices.SortStableFunc(info.endpoints, func(a, b model.Endpoint) int { return a.Addr.Compare(b.Addr) })
	info.shareable = true
	for i := 1; i < len(info.endpoints); i++ {
		if info.endpoints[i].Addr == info.endpoints[i-1].Addr {
			info.shareable = false
		}
	}
}

// hintsCache gives the endpoints of one slice with the same hints one
// copy of them: the controller hints most endpoints alike.
type hintsCache []*model.Hints

// get returns h as the dataplane takes it, or nil when it names no zone
// and no node.
func (c *hintsCache) get(h *discoveryv1.EndpointHints) *model.Hints {
	if len(h.ForZones) == 0 && len(h.ForNodes) == 0 {
		return nil
	}
	zones := func(z discoveryv1.ForZone) string { return z.Name }
	nodes := func(n discoveryv1.ForNode) string { return n.Name }
	for _, have := range *c {
		if equalNames(have.ForZones, h.ForZones, zones) && equalNames(have.ForNodes, h.ForNodes, nodes) {
			return have
		}
	}
	out := &model.Hints{ForZones: names(h.ForZones, zones), ForNodes: names(h.ForNodes, nodes)}
	*c = append(*c, out)
	return out
}

// names returns the names of a hint's zones or nodes, interned: they
// repeat across the cluster.
func names[T any](of []T, name func(T) string) []string {
	if len(of) == 0 {
		return nil
	}
	out := make([]string, len(of))
	for i, v := range of {
		out[i] = unique.Make(name(v)).Value()
	}
	return out
}

func equalNames[T any](have []string, of []T, name func(T) string) bool {
	return slices.EqualFunc(have, of, func(a string, b T) bool { return a == name(b) })
}
