package dataplane

import (
	"context"
	"errors"
	"net/netip"

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
	dev, err := d.links.Ensure(ctx, d.cfg.Device)
	if err == nil {
		d.device = dev
	}
	return err
}
