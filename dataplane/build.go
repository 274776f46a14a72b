package dataplane

import (
	"cmp"
	"maps"
	"slices"
)

// Desired is the desired kernel state of a model.
type Desired struct {
	Kernel *KernelState
	// Services names the service port each virtual server belongs to.
	Services map[VirtualKey]ServicePortName
	// Errors lists the service ports left out: invalid ones (*FieldError)
	// and those whose virtual servers another already has (*ConflictError).
	Errors []error
}

// Build computes the desired kernel state of a whole model. Service ports
// are taken in a fixed order (the API server's own service first, then by
// name), so which of two conflicting ports wins does not depend on the
// order of the input.
func Build(s *State) *Desired {
	d, failed, err := buildIndex(s)
	errs := []error{}
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.SortedFunc(maps.Keys(failed), compareNames) {
		errs = append(errs, failed[name])
	}
	return &Desired{Kernel: d.state, Services: d.owners, Errors: errs}
}

// buildIndex computes the desired state of a whole model: the index, the
// service ports left out, and the node's own error, if its settings are
// invalid (then nothing is programmed).
func buildIndex(s *State) (*desiredIndex, map[ServicePortName]error, error) {
	d := newDesiredIndex(s.Node, renderRules(&s.Node))
	failed := map[ServicePortName]error{}
	if err := s.Node.Validate(); err != nil {
		return d, failed, err
	}
	t := newTouched()
	for _, sp := range sortedServices(s.Services) {
		if err := put(d, sp, t); err != nil {
			failed[sp.Name] = err
		}
	}
	return d, failed, nil
}

// put validates a service port and puts it in the index; an invalid port
// keeps nothing programmed.
func put(d *desiredIndex, sp *ServicePort, t *touched) error {
	if err := sp.Validate(); err != nil {
		d.remove(sp.Name, t)
		return err
	}
	return d.put(sp, t)
}

func sortedServices(services []ServicePort) []*ServicePort {
	sorted := make([]*ServicePort, len(services))
	for i := range services {
		sorted[i] = &services[i]
	}
	slices.SortStableFunc(sorted, func(a, b *ServicePort) int {
		if c := cmp.Compare(servicePriority(a.Name), servicePriority(b.Name)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name.String(), b.Name.String())
	})
	return sorted
}
