package planner

import "github.com/ipvsplane/ipvsplane/dataplane/model"

// VirtualKeys lists the virtual servers a service port asks of this node:
// its cluster IPs, external and load-balancer addresses in the
// families it serves, and its node port on each node-port address. It is
// the list a sync programs, so that callers mapping the kernel's virtual
// servers back to service ports (for their traffic counters) need not
// work it out again. A virtual server that another service port claims
// too is listed for both; a port that a sync leaves out as invalid has
// none.
func VirtualKeys(n *model.Node, s *model.ServicePort) []VirtualKey {
	if s.Validate() != nil {
		return nil
	}
	// The endpoints decide real servers, never virtual ones: leave them
	// out, so the cost does not follow a large service's endpoints.
	bare := *s
	bare.Endpoints = nil
	c := contributionOf(n, &bare, nil)
	keys := make([]VirtualKey, 0, len(c.virtual))
	for i, v := range c.virtual {
		// A health-check node port's claim is no virtual server.
		if c.kinds[i] != kindHealthCheck {
			keys = append(keys, v.VirtualKey)
		}
	}
	return keys
}
