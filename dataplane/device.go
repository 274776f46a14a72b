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
func (d *Dataplane) applyAddresses(ctx context.Context, ops []plan.Op) []error {
	addrs := make([]netip.Addr, len(ops))
	_, bind := ops[0].(plan.Bind)
	for i, op := range ops {
		if bind {
			addrs[i] = op.(plan.Bind).Addr
		} else {
			addrs[i] = op.(plan.Unbind).Addr
		}
	}
	var err error
	switch {
	case bind:
		if err = d.ensureDevice(ctx); err == nil {
			err = d.device.BindAll(ctx, addrs)
			if errors.Is(err, dummy.ErrLinkNotExist) {
				// Deleted behind the dataplane's back: make it again.
				d.device = nil
				if err = d.ensureDevice(ctx); err == nil {
					err = d.device.BindAll(ctx, addrs)
				}
			}
		}
	case d.device != nil:
		err = d.device.UnbindAll(ctx, addrs)
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
			errs = append(errs, d.failed(op, all))
		case failed[i] != nil:
			errs = append(errs, d.failed(op, failed[i]))
		default:
			d.succeeded(op)
		}
	}
	return errs
}

func (d *Dataplane) ensureDevice(ctx context.Context) error {
	if d.device != nil {
		return nil
	}
	dev, err := d.k.links.Ensure(ctx, d.cfg.Device)
	if err == nil {
		d.device = dev
	}
	return err
}

// unbindLeftovers removes the virtual IPs the last full read found bound
// the other way than the configured binding, after the plan has bound them
// this way. Those that fail are tried again on the next sync. When the
// last IPv4 address of a device goes, the kernel flushes every route
// through it: a switch to local routes then binds them again at once,
// which leaves their delivery a gap of one request.
func (d *Dataplane) unbindLeftovers(ctx context.Context) error {
	if len(d.leftovers) == 0 || d.device == nil {
		return nil
	}
	left := d.leftovers
	d.leftovers = nil
	err := d.device.UnbindLeftovers(ctx, left)
	var batch *dummy.BatchError
	if errors.As(err, &batch) {
		for _, f := range batch.Failed {
			d.leftovers = append(d.leftovers, left[f.Index])
		}
	}
	if err != nil {
		return fmt.Errorf("dataplane: unbinding virtual IPs bound other than as %s: %w", d.cfg.Binding, err)
	}
	if d.cfg.Binding != dummy.BindLocalRoutes {
		return nil
	}
	bound := slices.Collect(maps.Keys(d.programmed.Addresses))
	if err := d.device.BindAll(ctx, bound); err != nil {
		// Believed unbound, they are bound by the next sync's compare.
		d.programmed.Addresses = map[netip.Addr]bool{}
		d.retry.All = true
		return fmt.Errorf("dataplane: binding virtual IPs as %s again after the addresses went: %w", d.cfg.Binding, err)
	}
	return nil
}
