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
