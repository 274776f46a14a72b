package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
)

// applyAddresses binds or unbinds many addresses in few writes.
func (a *applier) applyAddresses(ctx context.Context, ops []plan.Op) []error {
	addrs := make([]netip.Addr, len(ops))
	_, bind := addressOf(ops[0])
	for i, op := range ops {
		addrs[i], _ = addressOf(op)
	}
	var err error
	switch {
	case bind:
		if err = a.ensureDevice(ctx); err == nil {
			err = a.device.BindAll(ctx, addrs)
			if errors.Is(err, dummy.ErrLinkNotExist) {
				// Deleted behind the dataplane's back: make it again.
				a.device = nil
				if err = a.ensureDevice(ctx); err == nil {
					err = a.device.BindAll(ctx, addrs)
				}
			}
		}
	case a.device != nil:
		err = a.device.UnbindAll(ctx, addrs)
	}
	// Failures name their address by its index; an error that lists
	// none is the whole batch's.
	failed := map[int]error{}
	var all error
	var batch *dummy.BatchError
	if errors.As(err, &batch) {
		for _, f := range batch.Failed {
			failed[f.Index] = f
		}
	} else {
		all = err
	}
	var errs []error
	for i, op := range ops {
		switch {
		case all != nil:
			errs = append(errs, a.ledger.failed(op, all))
		case failed[i] != nil:
			errs = append(errs, a.ledger.failed(op, failed[i]))
		default:
			a.ledger.succeeded(op)
		}
	}
	return errs
}

// addressOf returns the address an operation binds (bind) or unbinds.
func addressOf(op plan.Op) (addr netip.Addr, bind bool) {
	switch o := op.(type) {
	case plan.Bind:
		return o.Addr, true
	case plan.Unbind:
		return o.Addr, false
	}
	// A kind of operation the planner batches as addresses without its
	// address here (TestEveryOperationIsNamed).
	panic(fmt.Sprintf("dataplane: no address of %T", op))
}

// ensureDevice makes the dummy device unless the applier has it.
func (a *applier) ensureDevice(ctx context.Context) error {
	if a.device != nil {
		return nil
	}
	dev, err := a.k.links.Ensure(ctx, a.cfg.Device)
	if err == nil {
		a.device = dev
	}
	return err
}

// unbindLeftovers removes the virtual IPs the last full read found bound
// the other way than the configured binding, after the plan has bound them
// this way. Those that fail are tried again on the next sync. When the
// last IPv4 address of a device goes, the kernel flushes every route
// through it: a switch to local routes then binds them again at once,
// which leaves their delivery a gap of one request.
func (a *applier) unbindLeftovers(ctx context.Context) error {
	l := a.ledger
	if len(l.leftovers) == 0 || a.device == nil {
		return nil
	}
	left := l.leftovers
	l.leftovers = nil
	err := a.device.UnbindLeftovers(ctx, left)
	var batch *dummy.BatchError
	if errors.As(err, &batch) {
		for _, f := range batch.Failed {
			l.leftovers = append(l.leftovers, left[f.Index])
		}
	}
	if err != nil {
		return fmt.Errorf("dataplane: unbinding virtual IPs bound other than as %s: %w", a.cfg.Binding, err)
	}
	if a.cfg.Binding != dummy.BindLocalRoutes {
		return nil
	}
	bound := slices.Collect(maps.Keys(l.state.Addresses))
	if err := a.device.BindAll(ctx, bound); err != nil {
		// Believed unbound, they are bound by the next sync's compare.
		l.state.Addresses = map[netip.Addr]bool{}
		l.retry.All = true
		return fmt.Errorf("dataplane: binding virtual IPs as %s again after the addresses went: %w", a.cfg.Binding, err)
	}
	return nil
}

// findDevice takes the device a read found (present), or forgets it.
func (a *applier) findDevice(ctx context.Context, present bool) error {
	var err error
	switch {
	case !present:
		a.device = nil
	case a.device == nil:
		// Known, so that stale addresses can be unbound.
		if a.device, err = a.k.links.Get(ctx, a.cfg.Device); err != nil && !errors.Is(err, dummy.ErrLinkNotExist) {
			return err
		}
	}
	return nil
}
