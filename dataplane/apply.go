package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// OpError is the failure of one planned operation.
type OpError struct {
	Op  plan.Op
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("%s: %v", e.Op, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }

// apply carries out a plan batch by batch, in order (see plan.BatchKind).
// Each success is recorded in the programmed state; each failure is
// returned and its objects are planned again on the next sync.
func (d *Dataplane) apply(ctx context.Context, pl *plan.Plan) []error {
	var errs []error
	for _, ph := range pl.Phases {
		for _, b := range ph.Batches {
			switch b.Kind {
			case plan.AddressBatch:
				errs = append(errs, d.applyAddresses(ctx, b.Ops)...)
			case plan.IPVSBatch:
				errs = append(errs, d.applyIPVS(ctx, b)...)
			default:
				errs = append(errs, d.applyEach(ctx, b.Ops)...)
			}
		}
	}
	return errs
}

// applyEach carries out operations one by one.
func (d *Dataplane) applyEach(ctx context.Context, ops []plan.Op) []error {
	var errs []error
	for _, op := range ops {
		if err := d.applyOne(ctx, op); err != nil {
			errs = append(errs, d.failed(op, err))
		} else {
			d.succeeded(op)
		}
	}
	return errs
}

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
			if errors.Is(err, dummy.ErrLinkNotFound) {
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
	// Failures name their address; a failure that names none is the
	// whole batch's.
	failed := map[netip.Addr]error{}
	var all error
	var batch *dummy.BatchError
	if errors.As(err, &batch) {
		for _, f := range batch.Failed {
			if f.Addr.IsValid() {
				failed[f.Addr] = f
			} else {
				all = f
			}
		}
	} else {
		all = err
	}
	var errs []error
	for i, op := range ops {
		switch {
		case all != nil:
			errs = append(errs, d.failed(op, all))
		case failed[addrs[i]] != nil:
			errs = append(errs, d.failed(op, failed[addrs[i]]))
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

func (d *Dataplane) applyOne(ctx context.Context, op plan.Op) error {
	switch o := op.(type) {
	case plan.CreateSet:
		err := d.sets.Create(ctx, ipsetSet(o.Spec), ipset.ExistOK)
		if err == nil {
			d.setIndex[o.Spec.Name], err = d.sets.Index(ctx, o.Spec.Name)
		}
		return err
	case plan.AddEntries:
		return d.sets.AddEntries(ctx, o.Set, ipsetEntries(o.Entries), ipset.ExistOK)
	case plan.DelEntries:
		return d.sets.DeleteEntries(ctx, o.Set, ipsetEntries(o.Entries), ipset.ExistOK)
	case plan.ReplaceRules:
		if err := fault.Check(ctx, "nftables", "flush"); err != nil {
			return err
		}
		err := nftrules.Write(d.rules, d.planner.Node(), func(name string) (uint16, error) {
			if id, ok := d.setIndex[name]; ok {
				return id, nil
			}
			id, err := d.sets.Index(ctx, name)
			if err == nil {
				d.setIndex[name] = id
			}
			return id, err
		})
		if err != nil {
			// A failed transaction can leave messages queued on the
			// socket and replies unread in it (on Linux 6.12 every later
			// read of the table then failed with "unexpected header
			// type"): start again on a fresh socket.
			_ = d.rules.CloseLasting()
			rules, err2 := d.dialRules()
			if err2 != nil {
				return errors.Join(err, err2)
			}
			d.rules = rules
		}
		return err
	case plan.FlushConntrack:
		f := flushFilter(o)
		start := d.cfg.Now()
		n, err := d.flows.DeleteMatching(ctx, f)
		if t := d.flowTally; t != nil {
			i := 0
			if o.Addr.Is6() {
				i = 1
			}
			t.Ran[i] = true
			t.Deleted[i] += n
			t.Took[i] += d.cfg.Now().Sub(start)
		}
		return err
	case plan.RemoveKubeProxyRules:
		// Never leave the node without rules for its services.
		if d.programmed.Rules != d.desired().Rules {
			return errors.New("ipvsplane's own rules are not in place")
		}
		return removeKubeProxyChains(d.rules, o.Chains)
	}
	return fmt.Errorf("no kernel operation for %T", op)
}

// desired returns the planner's desired state.
func (d *Dataplane) desired() *plan.KernelState {
	k, _ := d.planner.Desired()
	return k
}

// ipvsRequest is one request of an IPVS batch: operation op of the
// batch's operations, and for an AddReals the real server at real.
type ipvsRequest struct {
	op, real int
}

// applyIPVS sends IPVS operations as one batch, an AddReals as one request
// per real server. An addition that finds its object there (left by an
// earlier run, or adopted) becomes an update, and a deletion that finds
// nothing has nothing to do. Each failure is returned per request, so a
// real server that failed is named alone.
func (d *Dataplane) applyIPVS(ctx context.Context, batch plan.Batch) []error {
	ops, n := batch.Ops, batch.Requests()
	reqs := make([]ipvsRequest, 0, n)
	var b ipvs.Batch
	b.Grow(n)
	for i, op := range ops {
		if o, ok := op.(plan.AddReals); ok {
			svc := ipvsKey(o.Virtual)
			for j, r := range o.Reals {
				reqs = append(reqs, ipvsRequest{op: i, real: j})
				b.CreateDestination(svc, ipvsDestination(r))
			}
			continue
		}
		reqs = append(reqs, ipvsRequest{op: i})
		addIPVS(&b, op)
	}
	failures := d.sendIPVS(ctx, &b)
	var retry []int
	for i, err := range failures {
		op := ops[reqs[i].op]
		switch {
		case errors.Is(err, ipvs.ErrServiceNotExist) && isDelete(op, true),
			errors.Is(err, ipvs.ErrDestinationNotExist) && isDelete(op, false):
			delete(failures, i)
		case errors.Is(err, ipvs.ErrServiceExists) || errors.Is(err, ipvs.ErrDestinationExists):
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		slices.Sort(retry)
		b.Reset()
		for _, i := range retry {
			switch o := ops[reqs[i].op].(type) {
			case plan.AddReals:
				b.UpdateDestination(ipvsKey(o.Virtual), ipvsDestination(o.Reals[reqs[i].real]))
			case plan.AddVirtual:
				b.UpdateService(ipvsService(o.Virtual))
			}
		}
		retried := d.sendIPVS(ctx, &b)
		for j, i := range retry {
			if err, ok := retried[j]; ok {
				failures[i] = err
			} else {
				delete(failures, i)
			}
		}
	}
	return d.recordIPVS(ops, reqs, failures)
}

// sendIPVS applies a batch and returns its failures by their place in
// the batch.
func (d *Dataplane) sendIPVS(ctx context.Context, b *ipvs.Batch) map[int]error {
	failures := map[int]error{}
	var batchErr *ipvs.BatchError
	if err := d.ipvs.Apply(ctx, b); errors.As(err, &batchErr) {
		for _, f := range batchErr.Failed {
			failures[f.Index] = f
		}
	} else if err != nil {
		for i := range b.Len() {
			failures[i] = err
		}
	}
	return failures
}

// recordIPVS records what a batch did and returns its failures. The real
// server changes to one virtual server are recorded together, so its list
// is copied once per batch, not once per real server.
func (d *Dataplane) recordIPVS(ops []plan.Op, reqs []ipvsRequest, failures map[int]error) []error {
	var errs []error
	realOps := map[plan.VirtualKey][]plan.Op{}
	var order []plan.VirtualKey
	for i := 0; i < len(reqs); {
		op := ops[reqs[i].op]
		if o, ok := op.(plan.AddReals); ok {
			// Its requests are the next len(o.Reals), one per real server.
			var kept plan.Reals
			failed := 0
			for j, r := range o.Reals {
				err, bad := failures[i+j]
				switch {
				case bad:
					if failed == 0 {
						kept = slices.Clone(o.Reals[:j])
					}
					failed++
					errs = append(errs, d.failed(plan.AddReals{Virtual: o.Virtual, Reals: o.Reals[j : j+1]}, err))
				case failed > 0:
					kept = append(kept, r)
				}
			}
			i += len(o.Reals)
			if failed == len(o.Reals) {
				continue
			}
			if failed > 0 {
				op = plan.AddReals{Virtual: o.Virtual, Reals: kept}
			}
		} else {
			err, bad := failures[i]
			i++
			if bad {
				errs = append(errs, d.failed(op, err))
				continue
			}
		}
		vk, changesReals := plan.RealsTarget(op)
		if !changesReals {
			d.succeeded(op)
			continue
		}
		if _, ok := realOps[vk]; !ok {
			order = append(order, vk)
		}
		realOps[vk] = append(realOps[vk], op)
	}
	for _, vk := range order {
		d.succeededReals(vk, realOps[vk])
	}
	return errs
}

func addIPVS(b *ipvs.Batch, op plan.Op) {
	switch o := op.(type) {
	case plan.AddVirtual:
		b.CreateService(ipvsService(o.Virtual))
	case plan.UpdateVirtual:
		b.UpdateService(ipvsService(o.Virtual))
	case plan.DeleteVirtual:
		b.DeleteService(ipvsKey(o.Virtual))
	case plan.UpdateReal:
		b.UpdateDestination(ipvsKey(o.Virtual), ipvsDestination(o.Real))
	case plan.DeleteReal:
		b.DeleteDestination(ipvsKey(o.Virtual), ipvsDestination(plan.RealServer{RealKey: o.Real}))
	}
}

func isDelete(op plan.Op, virtual bool) bool {
	switch op.(type) {
	case plan.DeleteVirtual:
		return virtual
	case plan.DeleteReal:
		return !virtual
	}
	return false
}
