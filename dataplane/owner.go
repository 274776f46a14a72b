package dataplane

import (
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
)

// Owner returns the service port a virtual server belongs to in the
// desired state of the last sync or prefill: of service ports that claim
// one virtual server (a [plan.ConflictError]), the one programmed. What
// maps the kernel's virtual servers back to service ports (traffic
// counters, a status) credits it, not whichever claimed it last. Call it
// between syncs, from the goroutine that syncs.
func (d *Dataplane) Owner(vk plan.VirtualKey) (model.ServicePortName, bool) {
	_, owners := d.planner.Desired()
	name, ok := owners[vk]
	return name, ok
}

// Claims returns the virtual servers a service port claims in the desired
// state of the last sync or prefill, Owner's answer the other way round:
// those it owns, and those it claims while another port owns them (a
// [plan.ConflictError]); not its health-check node port, which is no
// virtual server. A port left out as invalid, or not in the state, has
// none. They are read from the planner's index, as the sync planned
// them, with what it learned of the kernel (another program's virtual
// servers, which an external IP or load-balancer address does not take;
// a kernel without IPv6): [plan.VirtualKeys] works a port's out again
// from the model alone. What maps the kernel's virtual servers back to
// service ports asks Claims which a changed port has, and Owner which of
// them it is credited. Call it between syncs, from the goroutine that
// syncs.
func (d *Dataplane) Claims(name model.ServicePortName) []plan.VirtualKey {
	return d.planner.Claims(name)
}
