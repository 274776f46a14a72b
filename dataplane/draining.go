package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// drain returns the drain settings of a plan made now.
func (d *Dataplane) drain() plan.Drain {
	return plan.Drain{Since: d.draining, Timeout: d.cfg.DrainTimeout, Timeouts: d.planner.DrainTimeouts(), Now: d.cfg.Now()}
}

// refreshDraining reads the connection counts of the real servers that
// drain, one dump per virtual server that has some, so the plan can delete
// those whose connections ended.
func (d *Dataplane) refreshDraining(ctx context.Context) error {
	for vk := range d.draining {
		dests, err := d.ipvs.Destinations(ctx, ipvsKey(vk))
		if err != nil {
			return fmt.Errorf("dataplane: reading the real servers of %s: %w", vk, err)
		}
		current := realsFromIPVS(dests)
		if _, ok := d.programmed.Virtual[vk]; ok {
			d.programmed.Reals[vk] = current
		}
		for rk := range d.draining[vk] {
			if _, ok := current.Get(rk); !ok {
				delete(d.draining[vk], rk)
			}
		}
		if len(d.draining[vk]) == 0 {
			delete(d.draining, vk)
		}
	}
	return nil
}

// refreshLeaving reads the connection counts of the virtual servers in
// scope that lose real servers still at a weight, one dump each, so the
// plan deletes at once those with no connection and drains the others,
// as kube-proxy reads them before it deletes a real server.
func (d *Dataplane) refreshLeaving(ctx context.Context, desired *plan.KernelState, scope plan.Scope) error {
	keys := scope.Virtual
	if scope.All {
		keys = map[plan.VirtualKey]bool{}
		for vk := range d.programmed.Virtual {
			keys[vk] = true
		}
	}
	for vk := range keys {
		if _, ok := d.programmed.Virtual[vk]; !ok || !plan.LosesReals(d.programmed, desired, vk) {
			continue
		}
		dests, err := d.ipvs.Destinations(ctx, ipvsKey(vk))
		if errors.Is(err, ipvs.ErrServiceNotExist) {
			// Gone behind the dataplane's back: its deletions fail
			// harmlessly, and the next read of the kernel repairs it.
			continue
		}
		if err != nil {
			return fmt.Errorf("dataplane: reading the real servers of %s: %w", vk, err)
		}
		d.programmed.Reals[vk] = realsFromIPVS(dests)
	}
	return nil
}

// succeeded records carried-out operations.
func (d *Dataplane) succeeded(ops ...plan.Op) {
	d.programmed.Record(ops...)
	for _, op := range ops {
		d.trackDraining(op)
	}
}

// trackDraining notes when real servers start and stop draining.
func (d *Dataplane) trackDraining(op plan.Op) {
	switch o := op.(type) {
	case plan.UpdateReal:
		if o.Real.Weight == 0 {
			if d.draining[o.Virtual] == nil {
				d.draining[o.Virtual] = map[plan.RealKey]time.Time{}
			}
			d.draining[o.Virtual][o.Real.RealKey] = d.cfg.Now()
		} else {
			d.stopDraining(o.Virtual, o.Real.RealKey)
		}
	case plan.DeleteReal:
		d.stopDraining(o.Virtual, o.Real)
	case plan.DeleteVirtual:
		delete(d.draining, o.Virtual)
	}
}

// shareReals makes the programmed real server lists that equal the
// desired ones the desired ones: after the kernel was read, the
// programmed state would otherwise hold a second copy of every list.
func (d *Dataplane) shareReals(desired *plan.KernelState) {
	for vk, have := range d.programmed.Reals {
		if want, ok := desired.Reals[vk]; ok && slices.Equal(have, want) {
			d.programmed.Reals[vk] = want
		}
	}
}

func (d *Dataplane) stopDraining(vk plan.VirtualKey, rk plan.RealKey) {
	delete(d.draining[vk], rk)
	if len(d.draining[vk]) == 0 {
		delete(d.draining, vk)
	}
}
