package proxier

import (
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// containPlanPanic handles a sync whose planning panicked (a bug some
// input found): instead of crashing on every node at every start, the
// service ports being planned are left out until they change, each gets
// an Event, and the next sync compares everything with the rest. A panic
// over a whole state leaves out the ports that panic planned alone. It
// reports whether it left any out.
func (p *Proxier) containPlanPanic(err error, u *watcher.Update) bool {
	var pe *dataplane.PlanPanicError
	if !errors.As(err, &pe) {
		return false
	}
	p.metrics.PlanPanicked()
	// The dataplane dropped its planner: the next sync hands it all.
	p.wholeNext = true
	suspects := pe.Services
	if suspects == nil {
		suspects = panickingAlone(&u.State)
	}
	p.log.Error("planning panicked; the service ports being planned are left out until they change, and the rest is synced again (please report this bug)",
		zap.Any("panic", pe.Value), zap.Stringers("servicePorts", suspects), zap.ByteString("stack", pe.Stack))
	if p.quarantined == nil {
		p.quarantined = map[model.ServicePortName]bool{}
	}
	for _, name := range suspects {
		p.quarantined[name] = true
		p.events.Eventf(events.ServiceRef(name.Namespace, name.Name), v1.EventTypeWarning, "PlanningPanicked", "Sync",
			fmt.Sprintf("ipvsplane's planner panicked on port %q of this Service; the port is left out until the Service or its endpoints change. This is a bug in ipvsplane: please report it", name.Port))
	}
	return len(suspects) > 0
}

// panickingAlone returns the service ports of s whose planning panics
// with no other port beside them.
func panickingAlone(s *model.State) []model.ServicePortName {
	var out []model.ServicePortName
	rules := func(*model.Node) string { return "" }
	for i := range s.Services {
		alone := &model.State{Node: s.Node, Services: s.Services[i : i+1]}
		if buildPanics(alone, rules) {
			out = append(out, s.Services[i].Name)
		}
	}
	return out
}

func buildPanics(s *model.State, rules plan.Rules) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	plan.Build(s, rules)
	return false
}

// withoutQuarantined leaves the quarantined service ports out of u: of a
// whole state, and of changes, where a new version of a quarantined port
// is tried again (its next panic leaves it out again).
func (p *Proxier) withoutQuarantined(u *watcher.Update) {
	if len(p.quarantined) == 0 {
		return
	}
	if u.Whole {
		kept := u.State.Services[:0:0]
		for _, sp := range u.State.Services {
			if !p.quarantined[sp.Name] {
				kept = append(kept, sp)
			}
		}
		u.State.Services = kept
		return
	}
	for _, c := range u.Changes {
		delete(p.quarantined, c.Name)
	}
}
