package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// ipvsRequest is one request of an IPVS batch: operation op of the
// batch's operations, and for an AddReals the real server at real.
type ipvsRequest struct {
	op, real int
}

// of returns the operation of ops that r sends: for an AddReals, its one
// real server's.
func (r ipvsRequest) of(ops []plan.Op) plan.Op {
	op := ops[r.op]
	if o, ok := op.(plan.AddReals); ok {
		return plan.AddReals{Virtual: o.Virtual, Reals: o.Reals[r.real : r.real+1]}
	}
	return op
}

// applyIPVS sends IPVS operations as one batch, an AddReals as one request
// per real server. An addition that finds its object there (left by an
// earlier run, or adopted) becomes an update, and a deletion that finds
// nothing has nothing to do. Each failure is returned per request, so a
// real server that failed is named alone.
func (a *applier) applyIPVS(ctx context.Context, batch planner.Batch) []error {
	ops, n := batch.Ops, batch.Requests()
	reqs := make([]ipvsRequest, 0, n)
	b := &a.ipvsBatch
	b.Reset()
	b.Grow(n)
	for i, op := range ops {
		for j := range addIPVS(b, op) {
			reqs = append(reqs, ipvsRequest{op: i, real: j})
		}
	}
	failures := a.k.sendIPVS(ctx, b)
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
			addUpdate(b, reqs[i].of(ops))
		}
		retried := a.k.sendIPVS(ctx, b)
		for j, i := range retry {
			if err, ok := retried[j]; ok {
				failures[i] = err
			} else {
				delete(failures, i)
			}
		}
	}
	return a.ledger.recordIPVS(ops, reqs, failures)
}

// sendIPVS applies a batch and returns its failures by their place in
// the batch.
func (k *kernel) sendIPVS(ctx context.Context, b *ipvs.Batch) map[int]error {
	failures := map[int]error{}
	var batchErr *ipvs.BatchError
	if err := k.ipvs.Apply(ctx, b); errors.As(err, &batchErr) {
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

// recordIPVS records what a batch did and returns its failures. The
// programmed state records the batch's successes together (see
// plan.KernelState.Record).
func (l *ledger) recordIPVS(ops []plan.Op, reqs []ipvsRequest, failures map[int]error) []error {
	var errs []error
	var done []plan.Op
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
					errs = append(errs, l.failed(plan.AddReals{Virtual: o.Virtual, Reals: o.Reals[j : j+1]}, err))
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
				errs = append(errs, l.failed(op, err))
				continue
			}
		}
		done = append(done, op)
	}
	l.succeeded(done...)
	return errs
}

// addIPVS adds the requests of an IPVS operation to b and returns how
// many: one, or one per real server of an AddReals.
func addIPVS(b *ipvs.Batch, op plan.Op) int {
	switch o := op.(type) {
	case plan.AddVirtual:
		b.CreateService(ipvsService(o.Virtual))
	case plan.UpdateVirtual:
		b.UpdateService(ipvsService(o.Virtual))
	case plan.DeleteVirtual:
		b.DeleteService(ipvsKey(o.Virtual))
	case plan.AddReals:
		svc := ipvsKey(o.Virtual)
		for _, r := range o.Reals {
			b.CreateDestination(svc, ipvsDestination(r))
		}
		return len(o.Reals)
	case plan.UpdateReal:
		b.UpdateDestination(ipvsKey(o.Virtual), ipvsDestination(o.Real))
	case plan.DeleteReal:
		b.DeleteDestination(ipvsKey(o.Virtual), ipvsDestination(plan.RealServer{RealKey: o.Real}))
	default:
		// A kind of operation the planner batches as IPVS without its
		// requests here (TestEveryOperationIsNamed).
		panic(fmt.Sprintf("dataplane: no IPVS request for %T", op))
	}
	return 1
}

// addUpdate adds to b the update that stands in for an addition that
// found its object there: left by an earlier run, or adopted. Only an
// addition can find its object there.
func addUpdate(b *ipvs.Batch, op plan.Op) {
	switch o := op.(type) {
	case plan.AddVirtual:
		b.UpdateService(ipvsService(o.Virtual))
	case plan.AddReals:
		for _, r := range o.Reals {
			b.UpdateDestination(ipvsKey(o.Virtual), ipvsDestination(r))
		}
	case plan.UpdateVirtual, plan.DeleteVirtual, plan.UpdateReal, plan.DeleteReal:
	default:
		// As in addIPVS.
		panic(fmt.Sprintf("dataplane: no IPVS update for %T", op))
	}
}

// isDelete reports whether op deletes a virtual server (virtual) or a
// real server (!virtual).
func isDelete(op plan.Op, virtual bool) bool {
	switch op.(type) {
	case plan.DeleteVirtual:
		return virtual
	case plan.DeleteReal:
		return !virtual
	case plan.AddVirtual, plan.UpdateVirtual, plan.AddReals, plan.UpdateReal:
		return false
	}
	// As in addIPVS.
	panic(fmt.Sprintf("dataplane: no IPVS deletion check for %T", op))
}
