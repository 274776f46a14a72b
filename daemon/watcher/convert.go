package watcher

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/sloppy"
)

// ServicePorts converts a Service and its EndpointSlices into the service
// ports the dataplane programs, with kube-proxy's rules. Slices of other
// services are ignored. It returns nil for a service kube-proxy does not
// program (headless, ExternalName, labelled for another proxy). Errors are
// [*InvalidError]s: for an invalid service it returns no ports; a bad
// entry (an external or load-balancer address, a source range, a slice's
// endpoint or port) is left out and the rest programmed; an invalid slice
// is left out and the other slices are still used.
func ServicePorts(svc *v1.Service, endpointSlices []*discoveryv1.EndpointSlice) ([]model.ServicePort, []error) {
	ports, err := convertService(svc)
	errs := Unjoin(err)
	if ports == nil {
		return nil, errs
	}
	endpointSlices = slices.SortedFunc(slices.Values(endpointSlices), func(a, b *discoveryv1.EndpointSlice) int {
		return cmp.Compare(a.Name, b.Name)
	})
	var infos []*sliceInfo
	for _, s := range endpointSlices {
		info, err := convertSlice(s)
		errs = append(errs, Unjoin(err)...)
		if info != nil && s.Namespace == svc.Namespace && info.service == svc.Name {
			infos = append(infos, info)
		}
	}
	return join(ports, infos), errs
}

// Unjoin returns the errors err joins (errors.Join), or err alone; none
// for nil. The errors an OnError callback gets may join several
// [*InvalidError]s, one per problem.
func Unjoin(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// ConvertNode returns base with what the Node object says: its InternalIP
// and then its ExternalIP addresses as the node's IPs (NodeIPs), when it
// has any, and its topology.kubernetes.io/zone label, when set. The order
// is kube-proxy's (GetNodeHostIPs): the first IP of each family in it is
// the node's primary IP of that family, whatever order the Node lists its
// addresses in (some cloud controllers list the ExternalIP first). The
// addresses node ports are served on stay base's, the node's interfaces'
// (as kube-proxy's IPVS mode serves them on every local address): a
// Node's ExternalIP is often not on the node at all. An address that does
// not parse is left out alone, as kube-proxy leaves it out, and the error
// names it.
func ConvertNode(base model.Node, n *v1.Node) (model.Node, error) {
	fail := objectError("Node", "", n.Name)
	var addrs []netip.Addr
	var leftOut []error
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for i, a := range n.Status.Addresses {
			if a.Type != typ {
				continue
			}
			ip, ok := sloppy.ParseAddr(a.Address)
			if !ok {
				leftOut = append(leftOut, fail.leftOut(fmt.Sprintf("status.addresses[%d].address", i), "%q is not an IP address; it is left out", a.Address))
				continue
			}
			if !slices.Contains(addrs, ip) {
				addrs = append(addrs, ip)
			}
		}
	}
	if len(addrs) > 0 {
		base.NodeIPs = addrs
	}
	if z := n.Labels[v1.LabelTopologyZone]; z != "" {
		base.Zone = z
	}
	return base, errors.Join(leftOut...)
}

// podCIDRs returns the first pod range of each family in the Node's
// spec.podCIDRs, the ranges kube-proxy's detectLocalMode NodeCIDR tells
// pods apart by.
func podCIDRs(n *v1.Node) ([]netip.Prefix, error) {
	fail := objectError("Node", "", n.Name)
	var out []netip.Prefix
	for i, c := range n.Spec.PodCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fail(fmt.Sprintf("spec.podCIDRs[%d]", i), "%q is not a CIDR", c)
		}
		p = p.Masked()
		if !slices.ContainsFunc(out, func(o netip.Prefix) bool { return o.Addr().Is4() == p.Addr().Is4() }) {
			out = append(out, p)
		}
	}
	return out, nil
}

// asInvalid returns err's *InvalidError, for callers that add a file and
// line.
func asInvalid(err error) (*InvalidError, bool) {
	var ie *InvalidError
	ok := errors.As(err, &ie)
	return ie, ok
}
