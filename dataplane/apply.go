package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// OpError is the failure of one planned operation.
type OpError struct {
	Op  Op
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("%s: %v", e.Op, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }

// apply carries out a plan in order. Consecutive IPVS operations go to the
// kernel as one batch; the rest one by one (ipset operations are bulk
// already). Each success is recorded in the programmed state; each failure
// is returned and its objects are planned again on the next sync.
func (d *Dataplane) apply(ctx context.Context, plan *Plan) []error {
	var errs []error
	ops := plan.Ops
	for i := 0; i < len(ops); {
		if isIPVSOp(ops[i]) {
			j := i
			for j < len(ops) && isIPVSOp(ops[j]) {
				j++
			}
			errs = append(errs, d.applyIPVS(ctx, ops[i:j])...)
			i = j
			continue
		}
		if err := d.applyOne(ctx, ops[i]); err != nil {
			errs = append(errs, d.failed(ops[i], err))
		} else {
			d.succeeded(ops[i])
		}
		i++
	}
	return errs
}

func isIPVSOp(op Op) bool {
	switch op.(type) {
	case AddVirtual, UpdateVirtual, DeleteVirtual, AddReal, UpdateReal, DeleteReal:
		return true
	}
	return false
}

func (d *Dataplane) applyOne(ctx context.Context, op Op) error {
	switch o := op.(type) {
	case CreateSet:
		err := d.sets.Create(ctx, o.Spec.ipset(), ipset.ExistOK)
		if err == nil {
			d.setIndex[o.Spec.Name], err = d.sets.Index(ctx, o.Spec.Name)
		}
		return err
	case AddEntries:
		entries, err := d.parseEntries(o.Set, o.Entries)
		if err != nil {
			return err
		}
		return d.sets.AddEntries(ctx, o.Set, entries, ipset.ExistOK)
	case DelEntries:
		entries, err := d.parseEntries(o.Set, o.Entries)
		if err != nil {
			return err
		}
		return d.sets.DeleteEntries(ctx, o.Set, entries, ipset.ExistOK)
	case ReplaceRules:
		return WriteRules(d.rules, &d.planner.index.node, func(name string) (uint16, error) {
			if id, ok := d.setIndex[name]; ok {
				return id, nil
			}
			id, err := d.sets.Index(ctx, name)
			if err == nil {
				d.setIndex[name] = id
			}
			return id, err
		})
	case Bind:
		// A device deleted behind the dataplane's back is made again.
		for attempt := 0; ; attempt++ {
			if d.device == nil {
				dev, err := d.links.Ensure(ctx, d.cfg.Device)
				if err != nil {
					return err
				}
				d.device = dev
			}
			err := d.device.Bind(ctx, o.Addr)
			if !errors.Is(err, dummy.ErrLinkNotFound) || attempt > 0 {
				return err
			}
			d.device = nil
		}
	case Unbind:
		if d.device == nil {
			return nil
		}
		return d.device.Unbind(ctx, o.Addr)
	case FlushConntrack:
		f := o.flushFilter()
		_, err := d.flows.DeleteMatching(ctx, &f)
		return err
	}
	return fmt.Errorf("no kernel operation for %T", op)
}

func (d *Dataplane) parseEntries(set string, entries []string) ([]ipset.Entry, error) {
	spec, ok := d.planner.index.state.Sets[set]
	if !ok {
		return nil, fmt.Errorf("unknown set %s", set)
	}
	parsed := make([]ipset.Entry, len(entries))
	for i, e := range entries {
		var err error
		if parsed[i], err = ipset.ParseEntry(ipset.Type(spec.Type), e); err != nil {
			return nil, err
		}
	}
	return parsed, nil
}

// applyIPVS sends IPVS operations as one batch. An addition that finds its
// object there (left by an earlier run, or adopted) becomes an update, and
// a deletion that finds nothing has nothing to do.
func (d *Dataplane) applyIPVS(ctx context.Context, ops []Op) []error {
	var b ipvs.Batch
	for _, op := range ops {
		addIPVS(&b, op)
	}
	failures := map[int]error{}
	var batchErr *ipvs.BatchError
	if err := d.ipvs.Apply(ctx, &b); errors.As(err, &batchErr) {
		for _, f := range batchErr.Failed {
			failures[f.Index] = f
		}
	} else if err != nil {
		for i := range ops {
			failures[i] = err
		}
	}
	var retry []int
	for i, op := range ops {
		err := failures[i]
		switch {
		case err == nil:
		case errors.Is(err, ipvs.ErrServiceNotExist) && isDelete(op, true),
			errors.Is(err, ipvs.ErrDestinationNotExist) && isDelete(op, false):
			delete(failures, i)
		case errors.Is(err, ipvs.ErrServiceExists) || errors.Is(err, ipvs.ErrDestinationExists):
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		b.Reset()
		for _, i := range retry {
			addIPVS(&b, asUpdate(ops[i]))
		}
		retried := map[int]error{}
		if err := d.ipvs.Apply(ctx, &b); errors.As(err, &batchErr) {
			for _, f := range batchErr.Failed {
				retried[retry[f.Index]] = f
			}
		} else if err != nil {
			for _, i := range retry {
				retried[i] = err
			}
		}
		for _, i := range retry {
			if err, ok := retried[i]; ok {
				failures[i] = err
			} else {
				delete(failures, i)
			}
		}
	}
	var errs []error
	for i, op := range ops {
		if err, ok := failures[i]; ok {
			errs = append(errs, d.failed(op, err))
		} else {
			d.succeeded(op)
		}
	}
	return errs
}

func addIPVS(b *ipvs.Batch, op Op) {
	switch o := op.(type) {
	case AddVirtual:
		b.CreateService(o.Virtual.ipvsService())
	case UpdateVirtual:
		b.UpdateService(o.Virtual.ipvsService())
	case DeleteVirtual:
		b.DeleteService(o.Virtual.ipvsService())
	case AddReal:
		b.CreateDestination(o.Virtual.ipvsService(), o.Real.ipvsDestination())
	case UpdateReal:
		b.UpdateDestination(o.Virtual.ipvsService(), o.Real.ipvsDestination())
	case DeleteReal:
		b.DeleteDestination(o.Virtual.ipvsService(), RealServer{RealKey: o.Real}.ipvsDestination())
	}
}

func isDelete(op Op, virtual bool) bool {
	switch op.(type) {
	case DeleteVirtual:
		return virtual
	case DeleteReal:
		return !virtual
	}
	return false
}

func asUpdate(op Op) Op {
	switch o := op.(type) {
	case AddVirtual:
		return UpdateVirtual(o)
	case AddReal:
		return UpdateReal(o)
	}
	return op
}
