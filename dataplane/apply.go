package dataplane

import (
	"context"
	"errors"
	"fmt"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"net/netip"
	"slices"

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
// kernel as one batch, and so do consecutive binds or unbinds; the rest go
// one by one (ipset operations are bulk already). Each success is recorded in the programmed state; each failure
// is returned and its objects are planned again on the next sync.
func (d *Dataplane) apply(ctx context.Context, plan *Plan) []error {
	var errs []error
	ops := plan.Ops
	for i := 0; i < len(ops); {
		switch ops[i].(type) {
		case Bind, Unbind:
			n := sameKindRun(ops[i:])
			errs = append(errs, d.applyAddresses(ctx, ops[i:i+n])...)
			i += n
			continue
		}
		if isIPVSOp(ops[i]) {
			// In pieces, so a first sync of a large cluster does not
			// encode every request at once.
			n := ipvsPiece(ops[i : i+sameKindRun(ops[i:])])
			errs = append(errs, d.applyIPVS(ctx, ops[i:i+n])...)
			i += n
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

// ipvsBatchRequests bounds the requests of one IPVS batch. The batch
// holds each request whole until the kernel has answered them all (some
// 400 bytes each), and its writes are cut to the socket's buffers anyway,
// so a larger batch costs memory and saves nothing.
const ipvsBatchRequests = 2048

// ipvsPiece returns how many of the IPVS operations ops go in one batch:
// as many as fit in ipvsBatchRequests requests, and at least one.
func ipvsPiece(ops []Op) int {
	requests := 0
	for i, op := range ops {
		if requests += ipvsRequests(op); requests > ipvsBatchRequests && i > 0 {
			return i
		}
	}
	return len(ops)
}

// ipvsRequests counts the requests an IPVS operation takes: one, or one
// per real server of an AddReals.
func ipvsRequests(op Op) int {
	if o, ok := op.(AddReals); ok {
		return len(o.Reals)
	}
	return 1
}

// sameKindRun returns how many operations from the first on go to the
// kernel together: IPVS operations, or binds, or unbinds.
func sameKindRun(ops []Op) int {
	n := 1
	switch ops[0].(type) {
	case Bind:
		for n < len(ops) && isBind(ops[n]) {
			n++
		}
	case Unbind:
		for n < len(ops) && isUnbind(ops[n]) {
			n++
		}
	default:
		for isIPVSOp(ops[0]) && n < len(ops) && isIPVSOp(ops[n]) {
			n++
		}
	}
	return n
}

func isBind(op Op) bool   { _, ok := op.(Bind); return ok }
func isUnbind(op Op) bool { _, ok := op.(Unbind); return ok }

// applyAddresses binds or unbinds many addresses in few writes.
func (d *Dataplane) applyAddresses(ctx context.Context, ops []Op) []error {
	addrs := make([]netip.Addr, len(ops))
	bind := isBind(ops[0])
	for i, op := range ops {
		if bind {
			addrs[i] = op.(Bind).Addr
		} else {
			addrs[i] = op.(Unbind).Addr
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

func isIPVSOp(op Op) bool {
	switch op.(type) {
	case AddVirtual, UpdateVirtual, DeleteVirtual, AddReals, UpdateReal, DeleteReal:
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
		if err := fault.Check(ctx, "nftables", "flush"); err != nil {
			return err
		}
		err := WriteRules(d.rules, &d.planner.index.node, func(name string) (uint16, error) {
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
	case FlushConntrack:
		f := o.flushFilter()
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
	case RemoveKubeProxyRules:
		// Never leave the node without rules for its services.
		if d.programmed.Rules != d.planner.index.state.Rules {
			return errors.New("ipvsplane's own rules are not in place")
		}
		return removeKubeProxyChains(d.rules, o.Chains)
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
func (d *Dataplane) applyIPVS(ctx context.Context, ops []Op) []error {
	n := 0
	for _, op := range ops {
		n += ipvsRequests(op)
	}
	reqs := make([]ipvsRequest, 0, n)
	var b ipvs.Batch
	b.Grow(n)
	for i, op := range ops {
		if o, ok := op.(AddReals); ok {
			svc := o.Virtual.ipvsService()
			for j, r := range o.Reals {
				reqs = append(reqs, ipvsRequest{op: i, real: j})
				b.CreateDestination(svc, r.ipvsDestination())
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
		case errors.Is(err, ipvs.ErrServiceExist) || errors.Is(err, ipvs.ErrDestinationExist):
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		slices.Sort(retry)
		b.Reset()
		for _, i := range retry {
			switch o := ops[reqs[i].op].(type) {
			case AddReals:
				b.UpdateDestination(o.Virtual.ipvsService(), o.Reals[reqs[i].real].ipvsDestination())
			case AddVirtual:
				b.UpdateService(o.Virtual.ipvsService())
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
func (d *Dataplane) recordIPVS(ops []Op, reqs []ipvsRequest, failures map[int]error) []error {
	var errs []error
	realOps := map[VirtualKey][]Op{}
	var order []VirtualKey
	for i := 0; i < len(reqs); {
		op := ops[reqs[i].op]
		if o, ok := op.(AddReals); ok {
			// Its requests are the next len(o.Reals), one per real server.
			var kept Reals
			failed := 0
			for j, r := range o.Reals {
				err, bad := failures[i+j]
				switch {
				case bad:
					if failed == 0 {
						kept = slices.Clone(o.Reals[:j])
					}
					failed++
					errs = append(errs, d.failed(AddReals{Virtual: o.Virtual, Reals: o.Reals[j : j+1]}, err))
				case failed > 0:
					kept = append(kept, r)
				}
			}
			i += len(o.Reals)
			if failed == len(o.Reals) {
				continue
			}
			if failed > 0 {
				op = AddReals{Virtual: o.Virtual, Reals: kept}
			}
		} else {
			err, bad := failures[i]
			i++
			if bad {
				errs = append(errs, d.failed(op, err))
				continue
			}
		}
		vk, changesReals := realsTarget(op)
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

func addIPVS(b *ipvs.Batch, op Op) {
	switch o := op.(type) {
	case AddVirtual:
		b.CreateService(o.Virtual.ipvsService())
	case UpdateVirtual:
		b.UpdateService(o.Virtual.ipvsService())
	case DeleteVirtual:
		b.DeleteService(o.Virtual.ipvsService())
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
