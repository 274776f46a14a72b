package planner

import (
	"cmp"
	"maps"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// Desired is the desired kernel state of a model.
type Desired struct {
	Kernel *KernelState
	// Services names the service port each virtual server belongs to.
	Services map[VirtualKey]model.ServicePortName
	// Errors lists the service ports left out as invalid
	// (*model.FieldError), the problems of ports that are programmed all
	// the same (*model.SchedulerError, *model.SettingError),
	// and the claims on a virtual server another port has
	// (*ConflictError), whose ports are programmed otherwise.
	Errors []error
}

// Rules renders the packet rules a node's settings call for. The desired
// state holds them in this printed form, and a plan replaces the rules
// when it changes; the dataplane's are nftrules.Render.
type Rules func(*model.Node) string

// Build computes the desired kernel state of a whole model, its rules
// rendered by rules. Which of two
// service ports claiming one virtual server gets it does not depend on
// the order of the input (see ConflictError).
func Build(s *model.State, rules Rules) *Desired {
	d, failed, err := buildIndex(s, rules, &kernelFacts{})
	errs := []error{}
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.SortedFunc(maps.Keys(failed), compareNames) {
		errs = append(errs, failed[name])
	}
	errs = append(append(errs, d.conflicts()...), d.problems()...)
	return &Desired{Kernel: d.state, Services: d.owners, Errors: errs}
}

// buildIndex computes the desired state of a whole model: the index, the
// service ports left out, and the node's own error, if its settings are
// invalid (then nothing is programmed).
func buildIndex(s *model.State, rules Rules, facts *kernelFacts) (*desiredIndex, map[model.ServicePortName]error, error) {
	d := newDesiredIndex(cloneNode(s.Node), rules(&s.Node), facts)
	failed := map[model.ServicePortName]error{}
	if err := s.Node.Validate(); err != nil {
		return d, failed, err
	}
	// The contributions come first, so the index's maps can be made at
	// the size they end at: growing them entry by entry was a third of a
	// first sync's planning. A build is compared whole: what it touches is
	// not recorded.
	sorted := sortedServices(s.Services)
	contribs := make([]*contribution, len(sorted))
	for i, sp := range sorted {
		if err := sp.Validate(); err != nil {
			failed[sp.Name] = err
			continue
		}
		contribs[i] = d.scratch.contributionOf(&d.node, sp, d.facts)
	}
	d.reserve(contribs)
	for i, c := range contribs {
		// As put: a later port of the same name replaces an earlier one.
		d.remove(sorted[i].Name, nil)
		if c != nil {
			d.addContribution(sorted[i].Name, c, nil)
		}
	}
	return d, failed, nil
}

// sortedServices orders service ports by priority, then name; the sort
// keys are made once, not formatted on every comparison.
func sortedServices(services []model.ServicePort) []*model.ServicePort {
	type sortKey struct {
		port     *model.ServicePort
		priority int
		name     string
	}
	keys := make([]sortKey, len(services))
	for i := range services {
		keys[i] = sortKey{&services[i], servicePriority(services[i].Name), services[i].Name.String()}
	}
	slices.SortStableFunc(keys, func(a, b sortKey) int {
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	sorted := make([]*model.ServicePort, len(keys))
	for i := range keys {
		sorted[i] = keys[i].port
	}
	return sorted
}
