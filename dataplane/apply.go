package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// applier carries out plans through the sync's own connections and enters
// each outcome in the ledger. Between syncs it keeps what makes the next
// writes cheap: the dummy device, the sets' kernel indexes and the IPVS
// batch's memory.
type applier struct {
	k      *kernel
	ledger *ledger
	cfg    *Config
	// device is the dummy device, once made or found; nil when a read
	// found none.
	device *dummy.Device
	// setIndex holds the kernel index of each set made or looked up,
	// which the rules match the set by.
	setIndex map[string]uint16
	// ipvsBatch is the batch applyIPVS fills, kept for its memory: a
	// first sync sends its IPVS operations as many batches in a row.
	ipvsBatch ipvs.Batch
}

// apply carries out a plan batch by batch, in order (see planner.BatchKind).
// Each success is recorded in the programmed state; each failure is
// returned and its objects are planned again on the next sync. Once an
// operation on the sets or rules failed, what would draw new traffic is
// held back (see holdBack); what is already programmed stays. The
// conntrack cleanup is tallied in flows.
func (a *applier) apply(ctx context.Context, pl *plan.Plan, t target, flows *FlowCleanup) []error {
	var errs []error
	prepared := true
	held := &HeldBackError{}
	for _, ph := range pl.Phases {
		for _, b := range ph.Batches {
			if !prepared {
				if b.Ops = a.holdBack(b.Ops, held); len(b.Ops) == 0 {
					continue
				}
			}
			var batchErrs []error
			switch b.Kind {
			case planner.AddressBatch:
				batchErrs = a.applyAddresses(ctx, b.Ops)
			case planner.IPVSBatch:
				batchErrs = a.applyIPVS(ctx, b)
			default:
				batchErrs = a.applyEach(ctx, b.Ops, t, flows)
			}
			if len(batchErrs) > 0 && prepares(b.Ops[0]) {
				prepared = false
			}
			errs = append(errs, batchErrs...)
		}
	}
	if held.Virtual+held.Addresses > 0 {
		errs = append(errs, held)
	}
	return errs
}

// prepares reports whether op writes what virtual servers and their
// addresses need before they may draw traffic: the sets, their entries
// and the rules that match them (masquerade, firewall). kube-proxy's sync
// stops when it cannot create a set or restore its rules.
func prepares(op plan.Op) bool {
	switch op.(type) {
	case plan.CreateSet, plan.AddEntries, plan.ReplaceRules:
		return true
	case plan.DelEntries, plan.AddVirtual, plan.UpdateVirtual, plan.DeleteVirtual, plan.AddReals, plan.UpdateReal, plan.DeleteReal,
		plan.Bind, plan.Unbind, plan.ReconcileFlows, plan.RemoveKubeProxyRules:
		return false
	}
	// A kind of operation added without saying whether it prepares
	// (TestEveryOperationIsNamed).
	panic(fmt.Sprintf("dataplane: %T neither prepares nor not", op))
}

// rulesFailed reports whether any of errs is the failure of an operation
// that prepares: the node is then not programmed.
func rulesFailed(errs []error) bool {
	for _, err := range errs {
		var oe *OpError
		if errors.As(err, &oe) && prepares(oe.Op) {
			return true
		}
	}
	return false
}

// holdBack returns the operations of ops that draw no new traffic, and
// counts in held, and plans again for the next sync, those that would: a
// new virtual server, real servers or weights for a virtual server not
// programmed, and addresses to bind. Changes to what is programmed, and
// removals, go ahead.
func (a *applier) holdBack(ops []plan.Op, held *HeldBackError) []plan.Op {
	kept := ops[:0:0]
	for _, op := range ops {
		hold := false
		switch o := op.(type) {
		case plan.AddVirtual:
			hold = true
			held.Virtual++
		case plan.AddReals:
			hold = !a.ledger.isProgrammed(o.Virtual)
		case plan.UpdateReal:
			hold = !a.ledger.isProgrammed(o.Virtual)
		case plan.Bind:
			hold = true
			held.Addresses++
		case plan.CreateSet, plan.AddEntries, plan.DelEntries, plan.ReplaceRules, plan.UpdateVirtual, plan.DeleteVirtual,
			plan.DeleteReal, plan.Unbind, plan.ReconcileFlows, plan.RemoveKubeProxyRules:
		default:
			// A kind of operation added without saying whether it draws
			// traffic (TestEveryOperationIsNamed).
			panic(fmt.Sprintf("dataplane: no hold back for %T", op))
		}
		if hold {
			a.ledger.retry.Touch(op)
		} else {
			kept = append(kept, op)
		}
	}
	return kept
}

// applyEach carries out operations one by one.
func (a *applier) applyEach(ctx context.Context, ops []plan.Op, t target, flows *FlowCleanup) []error {
	var errs []error
	for _, op := range ops {
		if err := a.applyOne(ctx, op, t, flows); err != nil {
			errs = append(errs, a.ledger.failed(op, err))
		} else {
			a.ledger.succeeded(op)
		}
	}
	return errs
}

// applyOne carries out an operation that goes on its own (planner.EachOp).
func (a *applier) applyOne(ctx context.Context, op plan.Op, t target, flows *FlowCleanup) error {
	write := a.onItsOwn(op, t, flows)
	if write == nil {
		return fmt.Errorf("no kernel operation of its own for %T", op)
	}
	return write(ctx)
}

// onItsOwn returns the kernel write of an operation that goes on its own
// (planner.EachOp), and nil for one that goes in a batch. It returns the
// write rather than making it so that a test can hand it every kind of
// operation without a kernel (TestEveryOperationIsNamed).
func (a *applier) onItsOwn(op plan.Op, t target, flows *FlowCleanup) func(context.Context) error {
	switch o := op.(type) {
	case plan.CreateSet:
		return func(ctx context.Context) error {
			err := a.k.sets.Create(ctx, ipsetSet(o.Spec), ipset.ExistOK)
			if err == nil {
				a.setIndex[o.Spec.Name], err = a.k.sets.Index(ctx, o.Spec.Name)
			}
			return err
		}
	case plan.AddEntries:
		return func(ctx context.Context) error {
			err := a.k.sets.AddEntriesTo(ctx, a.ledger.setOf(o.Set, t.kernel), ipsetEntries(o.Entries), ipset.ExistOK)
			if errors.Is(err, ipset.ErrSetFull) {
				return a.growSet(ctx, o)
			}
			return err
		}
	case plan.DelEntries:
		return func(ctx context.Context) error {
			return a.k.sets.DeleteEntriesFrom(ctx, a.ledger.setOf(o.Set, t.kernel), ipsetEntries(o.Entries), ipset.ExistOK)
		}
	case plan.ReplaceRules:
		return func(ctx context.Context) error {
			if err := fault.Check(ctx, "nftables", "flush"); err != nil {
				return err
			}
			return a.k.writeRules(t.node, func(name string) (uint16, error) { return a.setIndexOf(ctx, name) })
		}
	case plan.ReconcileFlows:
		return func(ctx context.Context) error {
			start := a.cfg.Now()
			n, err := a.reconcileFlows(ctx, t.planner, o)
			flows.add(o.Family, n, a.cfg.Now().Sub(start))
			return err
		}
	case plan.RemoveKubeProxyRules:
		return func(context.Context) error {
			// Never leave the node without rules for its services.
			if a.ledger.state.Rules != t.kernel.Rules {
				return ErrRulesNotProgrammed
			}
			return removeKubeProxyChains(a.k.rules, o.Chains)
		}
	case plan.AddVirtual, plan.UpdateVirtual, plan.DeleteVirtual, plan.AddReals, plan.UpdateReal, plan.DeleteReal, plan.Bind, plan.Unbind:
		return nil
	}
	// A kind of operation added without its kernel write
	// (TestEveryOperationIsNamed).
	panic(fmt.Sprintf("dataplane: no kernel write for %T", op))
}

// growSet makes a set that filled hold what the dataplane programmed in
// it and add's entries. A hash set's maxelem is fixed when it is made, so
// a larger one is filled and swapped in (ipset.Replace): readers never
// miss an entry the set held, and the set keeps its name and kernel
// index, which the rules match it by.
func (a *applier) growSet(ctx context.Context, add plan.AddEntries) error {
	have := a.ledger.state.Entries[add.Set]
	entries := make([]plan.Entry, 0, len(have)+len(add.Entries))
	for e := range have {
		entries = append(entries, e)
	}
	for _, e := range add.Entries {
		if !have[e] {
			entries = append(entries, e)
		}
	}
	spec := a.ledger.state.Sets[add.Set]
	spec.Name = add.Set
	spec = spec.Sized(len(entries))
	if err := a.k.sets.Replace(ctx, ipsetSet(spec), ipsetEntries(entries)); err != nil {
		return fmt.Errorf("dataplane: growing full ipset %s to maxelem %d: %w", add.Set, spec.MaxElem, err)
	}
	a.ledger.state.Sets[add.Set] = spec
	return nil
}

// setIndexOf returns the kernel index of ipset name, which the rules
// match by, remembered from when the set was made or first looked up.
func (a *applier) setIndexOf(ctx context.Context, name string) (uint16, error) {
	if id, ok := a.setIndex[name]; ok {
		return id, nil
	}
	id, err := a.k.sets.Index(ctx, name)
	if err == nil {
		a.setIndex[name] = id
	}
	return id, err
}

// program carries out pl, the plan of what scope covers, trying transient
// failures again, then unbinds the leftovers, and makes the programmed
// real server lists that equal the desired ones share them.
func (a *applier) program(ctx context.Context, pl *plan.Plan, t target, scope planner.Scope) applied {
	a.ledger.state.Grow(pl)
	out := a.applyRetrying(ctx, pl, t)
	if err := a.unbindLeftovers(ctx); err != nil {
		out.errs = append(out.errs, err)
	}
	a.ledger.shareReals(t.kernel, scope)
	return out
}
