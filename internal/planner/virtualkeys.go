package planner

import "github.com/ipvsplane/ipvsplane/dataplane/model"

// VirtualKeys lists the virtual servers a service port asks of this node:
// its cluster IPs, external and load-balancer addresses in the
// families it serves, and its node port on each node-port address: the
// list a sync programs, worked out from the model alone, for callers
// without a planner (a planner's port is read from its index:
// Planner.Claims). A virtual server that another service port claims
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
	return contributionOf(n, &bare, nil).virtualKeys()
}
