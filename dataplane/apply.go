package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// apply carries out a plan batch by batch, in order (see planner.BatchKind).
// Each success is recorded in the programmed state; each failure is
// returned and its objects are planned again on the next sync. Once an
// operation on the sets or rules failed, what would draw new traffic is
// held back (see holdBack); what is already programmed stays. The
// conntrack cleanup is tallied in flows.
func (d *Dataplane) apply(ctx context.Context, pl *plan.Plan, flows *FlowCleanup) []error {
	var errs []error
	prepared := true
	held := &HeldBackError{}
	for _, ph := range pl.Phases {
		for _, b := range ph.Batches {
			if !prepared {
				if b.Ops = d.holdBack(b.Ops, held); len(b.Ops) == 0 {
					continue
				}
			}
			var batchErrs []error
			switch b.Kind {
			case planner.AddressBatch:
				batchErrs = d.applyAddresses(ctx, b.Ops)
			case planner.IPVSBatch:
				batchErrs = d.applyIPVS(ctx, b)
			default:
				batchErrs = d.applyEach(ctx, b.Ops, flows)
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
	}
	return false
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
func (d *Dataplane) holdBack(ops []plan.Op, held *HeldBackError) []plan.Op {
	kept := ops[:0:0]
	for _, op := range ops {
		hold := false
		switch o := op.(type) {
		case plan.AddVirtual:
			hold = true
			held.Virtual++
		case plan.AddReals:
			hold = !d.isProgrammed(o.Virtual)
		case plan.UpdateReal:
			hold = !d.isProgrammed(o.Virtual)
		case plan.Bind:
			hold = true
			held.Addresses++
		}
		if hold {
			d.retry.Touch(op)
		} else {
			kept = append(kept, op)
		}
	}
	return kept
}

// failed remembers what a failed operation touched, to plan it again.
func (d *Dataplane) failed(op plan.Op, err error) error {
	d.retry.Touch(op)
	return &OpError{Op: op, Err: err}
}

// applyEach carries out operations one by one.
func (d *Dataplane) applyEach(ctx context.Context, ops []plan.Op, flows *FlowCleanup) []error {
	var errs []error
	for _, op := range ops {
		if err := d.applyOne(ctx, op, flows); err != nil {
			errs = append(errs, d.failed(op, err))
		} else {
			d.succeeded(op)
		}
	}
	return errs
}

func (d *Dataplane) applyOne(ctx context.Context, op plan.Op, flows *FlowCleanup) error {
	switch o := op.(type) {
	case plan.CreateSet:
		err := d.k.sets.Create(ctx, ipsetSet(o.Spec), ipset.ExistOK)
		if err == nil {
			d.setIndex[o.Spec.Name], err = d.k.sets.Index(ctx, o.Spec.Name)
		}
		return err
	case plan.AddEntries:
		err := d.k.sets.AddEntriesTo(ctx, d.setOf(o.Set), ipsetEntries(o.Entries), ipset.ExistOK)
		if errors.Is(err, ipset.ErrSetFull) {
			return d.growSet(ctx, o)
		}
		return err
	case plan.DelEntries:
		return d.k.sets.DeleteEntriesFrom(ctx, d.setOf(o.Set), ipsetEntries(o.Entries), ipset.ExistOK)
	case plan.ReplaceRules:
		if err := fault.Check(ctx, "nftables", "flush"); err != nil {
			return err
		}
		return d.k.writeRules(d.planner.Node(), func(name string) (uint16, error) { return d.setIndexOf(ctx, name) })
	case plan.ReconcileFlows:
		start := d.cfg.Now()
		n, err := d.reconcileFlows(ctx, o)
		flows.add(o.Family, n, d.cfg.Now().Sub(start))
		return err
	case plan.RemoveKubeProxyRules:
		// Never leave the node without rules for its services.
		if d.programmed.Rules != d.desired().Rules {
			return ErrRulesNotProgrammed
		}
		return removeKubeProxyChains(d.k.rules, o.Chains)
	}
	return fmt.Errorf("no kernel operation for %T", op)
}

// setOf returns set name as the dataplane made or found it, or else as it
// wants it: its entries are changed by that type and family, without a
// request asking the kernel for them first.
func (d *Dataplane) setOf(name string) ipset.Set {
	spec, ok := d.programmed.Sets[name]
	if !ok {
		spec = d.desired().Sets[name]
	}
	spec.Name = name
	return ipsetSet(spec)
}

// growSet makes a set that filled hold what the dataplane programmed in
// it and add's entries. A hash set's maxelem is fixed when it is made, so
// a larger one is filled and swapped in (ipset.Replace): readers never
// miss an entry the set held, and the set keeps its name and kernel
// index, which the rules match it by.
func (d *Dataplane) growSet(ctx context.Context, add plan.AddEntries) error {
	have := d.programmed.Entries[add.Set]
	entries := make([]plan.Entry, 0, len(have)+len(add.Entries))
	for e := range have {
		entries = append(entries, e)
	}
	for _, e := range add.Entries {
		if !have[e] {
			entries = append(entries, e)
		}
	}
	spec := d.programmed.Sets[add.Set]
	spec.Name = add.Set
	spec = spec.Sized(len(entries))
	if err := d.k.sets.Replace(ctx, ipsetSet(spec), ipsetEntries(entries)); err != nil {
		return fmt.Errorf("dataplane: growing full ipset %s to maxelem %d: %w", add.Set, spec.MaxElem, err)
	}
	d.programmed.Sets[add.Set] = spec
	return nil
}

// setIndexOf returns the kernel index of ipset name, which the rules
// match by, remembered from when the set was made or first looked up.
func (d *Dataplane) setIndexOf(ctx context.Context, name string) (uint16, error) {
	if id, ok := d.setIndex[name]; ok {
		return id, nil
	}
	id, err := d.k.sets.Index(ctx, name)
	if err == nil {
		d.setIndex[name] = id
	}
	return id, err
}

// isProgrammed reports whether virtual server vk is in the kernel.
func (d *Dataplane) isProgrammed(vk plan.VirtualKey) bool {
	_, ok := d.programmed.Virtual[vk]
	return ok
}

// desired returns the planner's desired state.
func (d *Dataplane) desired() *plan.KernelState {
	k, _ := d.planner.Desired()
	return k
}
