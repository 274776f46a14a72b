package dataplane

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// Result is what a sync did.
type Result struct {
	// Plan holds the operations the sync carried out (or tried to).
	Plan *plan.Plan
	// Full is true when the sync read the kernel and compared everything.
	Full bool
	// Errors lists the service ports left out (*FieldError,
	// *ConflictError) and the operations that failed (*OpError). Failed
	// operations are tried again on the next sync.
	Errors []error
	// Retries counts the rounds in which operations that failed with a
	// transient errno (ENOBUFS, EBUSY, ENOMEM, EAGAIN, EINTR) were tried
	// again within the sync, and the retried reads of the kernel.
	Retries int
	// Flows tallies the sync's conntrack cleanup.
	Flows FlowCleanup
}

// FlowCleanup tallies the conntrack flows a sync deleted, per family
// (index 0 IPv4, 1 IPv6), and the time that took: what kube-proxy's
// conntrack reconciler reports. Ran is false for a family nothing was
// deleted for.
type FlowCleanup struct {
	Ran     [2]bool
	Deleted [2]int
	Took    [2]time.Duration
}

// Sync makes the kernel hold what state describes. The first sync, and a
// sync after Resync, reads the kernel once and compares everything; later
// ones plan only the service ports that changed, the objects whose
// operations failed before, and the real servers still draining.
func (d *Dataplane) Sync(ctx context.Context, state *model.State) (*Result, error) {
	checkErrs := d.schedulers.check(ctx, d.planner, state.Node.EffectiveScheduler(), portSchedulers(state.Services))
	scope, modelErrs := d.planner.Update(state)
	return d.sync(ctx, scope, append(checkErrs, modelErrs...))
}

// SyncChanges is Sync for a caller that tracks which service ports changed
// (a watcher does): it costs what the changes cost, whatever the number of
// services. The node's settings stay those of the last Sync, which must
// have come first.
func (d *Dataplane) SyncChanges(ctx context.Context, changes []plan.Change) (*Result, error) {
	if d.planner.Node() == nil {
		return nil, errors.New("dataplane: SyncChanges before the first Sync: the node's settings are not known")
	}
	checkErrs := d.schedulers.check(ctx, d.planner, d.planner.Node().EffectiveScheduler(), changedSchedulers(changes))
	scope, modelErrs := d.planner.UpdateChanges(changes)
	return d.sync(ctx, scope, append(checkErrs, modelErrs...))
}

// portSchedulers yields the schedulers service ports name.
func portSchedulers(ports []model.ServicePort) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range ports {
			if ports[i].Scheduler != "" && !yield(ports[i].Scheduler) {
				return
			}
		}
	}
}

// changedSchedulers yields the schedulers the changed service ports name.
func changedSchedulers(changes []plan.Change) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, c := range changes {
			if c.Port != nil && c.Port.Scheduler != "" && !yield(c.Port.Scheduler) {
				return
			}
		}
	}
}

// drain returns the drain settings of a plan made now.
func (d *Dataplane) drain() plan.Drain {
	return plan.Drain{Since: d.draining, Timeout: d.cfg.DrainTimeout, Timeouts: d.planner.DrainTimeouts(), Now: d.cfg.Now()}
}

func (d *Dataplane) sync(ctx context.Context, scope plan.Scope, modelErrs []error) (*Result, error) {
	desired, owners := d.planner.Desired()
	node := d.planner.Node()
	res := &Result{}
	d.flowTally = &res.Flows
	defer func() { d.flowTally = nil }()
	// The kernel is read on the first sync and when the canary finds an
	// outside change, before anything is planned; the periodic reread
	// runs in the background, and the first sync after it ends merges it.
	reread := d.finishedReread()
	switch {
	case reread == nil:
	case reread.err != nil:
		res.Errors = append(res.Errors, fmt.Errorf("dataplane: rereading the kernel: %w", reread.err))
		reread = nil
	case reread.since.All:
		// Everything was compared with the programmed state meanwhile;
		// read again at once.
		d.lastFull, reread = time.Time{}, nil
	}
	switch {
	case d.programmed == nil || (!d.retry.All && !d.canaryAlive(ctx, node)):
		d.stopReread()
		var observed *plan.KernelState
		n, err := withRetries(ctx, func() (err error) {
			observed, err = d.observe(ctx, desired, node)
			return err
		})
		res.Retries += n
		if err != nil {
			d.programmed = nil
			return nil, fmt.Errorf("dataplane: reading the kernel: %w", err)
		}
		d.programmed, scope, res.Full = observed, plan.FullScope, true
		d.lastFull = d.cfg.Now()
	case reread != nil:
		res.Retries += reread.retries
		observed, err := d.ownedWithRules(ctx, reread.read, desired, node)
		if err != nil {
			return nil, fmt.Errorf("dataplane: reading the kernel: %w", err)
		}
		d.programmed = mergeRead(observed, d.programmed, *reread.since)
		scope, res.Full = plan.FullScope, true
	case d.retry.All:
		scope = plan.FullScope
	default:
		d.retry.Merge(scope)
		n, err := withRetries(ctx, func() error { return d.refreshDraining(ctx) })
		res.Retries += n
		if err != nil {
			return nil, err
		}
		for vk := range d.draining {
			d.retry.Virtual[vk] = true
		}
		scope = *d.retry
	}
	d.retry = plan.NewScope()
	if !res.Full && d.resyncDue() {
		if err := d.startReread(ctx); err != nil {
			res.Errors = append(res.Errors, err)
		}
		d.lastFull = d.cfg.Now()
	}
	if d.reread != nil {
		// What this sync changes, the reader may or may not see.
		d.reread.since.Merge(scope)
	}
	if scope.All {
		res.Errors = append(res.Errors, d.applyNodeSettings(ctx, node)...)
	}
	res.Plan = plan.Diff(d.programmed, desired, owners, scope, d.drain())
	opErrs, rounds := d.applyRetrying(ctx, res.Plan, desired, owners)
	if res.Full {
		d.shareReals(desired)
	}
	res.Retries += rounds
	res.Errors = append(append(modelErrs, res.Errors...), opErrs...)
	return res, nil
}

// canaryAlive checks, with a few requests whatever the cluster's size,
// that the kernel still holds what the dataplane programmed: a member of
// each ownership set, one of its virtual servers, its device and its rule
// tables. An outside flush of any of them (ipvsadm -C, ipset flush, a
// deleted device, nft flush ruleset) makes it false, and the sync reads
// the kernel again at once instead of at the next full resync.
func (d *Dataplane) canaryAlive(ctx context.Context, node *model.Node) bool {
	for _, ipv6 := range []bool{false, true} {
		if !d.setIntact(ctx, model.SetName(model.SetOwned, ipv6)) {
			return false
		}
	}
	for vk := range d.programmed.Virtual {
		if _, err := d.ipvs.GetService(ctx, ipvsKey(vk)); err != nil {
			return false
		}
		break
	}
	if len(d.programmed.Addresses) > 0 {
		if _, err := d.links.Get(ctx, d.cfg.Device); err != nil {
			return false
		}
	}
	current, err := nftrules.Current(d.rules, node)
	return err == nil && current
}

// setIntact tests one of the members the dataplane put in a set, or for
// a set it left empty, that the set is there and empty. Counting a set's
// members would make the kernel walk all of it (it sizes the set's memory
// as it answers), which costs as much as the cluster is large on every
// sync.
func (d *Dataplane) setIntact(ctx context.Context, name string) bool {
	for e := range d.programmed.Entries[name] {
		in, err := d.sets.Test(ctx, name, ipsetEntry(e))
		return err == nil && in
	}
	h, err := d.sets.Header(ctx, name)
	return err == nil && h.Entries == 0
}

// Resync forgets what the dataplane believes the kernel holds, so the next
// Sync reads the kernel again and repairs whatever changed behind its back.
func (d *Dataplane) Resync() {
	d.stopReread()
	d.programmed = nil
}

// DryRun returns the plan a first sync of state would carry out against
// the kernel as it is now, and changes nothing.
func (d *Dataplane) DryRun(ctx context.Context, state *model.State) (*plan.Plan, []error, error) {
	desired := plan.Build(state, nftrules.Render)
	observed, err := d.observe(ctx, desired.Kernel, &state.Node)
	if err != nil {
		return nil, nil, fmt.Errorf("dataplane: reading the kernel: %w", err)
	}
	return plan.Diff(observed, desired.Kernel, desired.Services, plan.FullScope, plan.Drain{}), desired.Errors, nil
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

// succeeded records a carried-out operation.
func (d *Dataplane) succeeded(op plan.Op) {
	d.programmed.Record(op)
	d.trackDraining(op)
}

// succeededReals records the carried-out changes to one virtual server's
// real servers, copying its list once for all of them.
func (d *Dataplane) succeededReals(vk plan.VirtualKey, ops []plan.Op) {
	d.programmed.Reals[vk] = d.programmed.Reals[vk].Changed(ops...)
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

// failed remembers what a failed operation touched, to plan it again.
func (d *Dataplane) failed(op plan.Op, err error) error {
	s := d.retry
	switch o := op.(type) {
	case plan.CreateSet, plan.ReplaceRules, plan.RemoveKubeProxyRules:
		d.retry.All = true
	case plan.AddEntries:
		d.retry.AddEntries(o.Set, o.Entries)
	case plan.DelEntries:
		d.retry.AddEntries(o.Set, o.Entries)
	case plan.AddVirtual:
		s.Virtual[o.Virtual.VirtualKey] = true
	case plan.UpdateVirtual:
		s.Virtual[o.Virtual.VirtualKey] = true
	case plan.DeleteVirtual:
		s.Virtual[o.Virtual] = true
	case plan.Bind:
		s.Addresses[o.Addr] = true
	case plan.Unbind:
		s.Addresses[o.Addr] = true
	}
	if vk, ok := plan.RealsTarget(op); ok {
		s.Virtual[vk] = true
	}
	return &OpError{Op: op, Err: err}
}

// applyNodeSettings writes the sysctls and the IPVS timeouts.
func (d *Dataplane) applyNodeSettings(ctx context.Context, node *model.Node) []error {
	var errs []error
	err := d.inNamespace(func() error {
		_, err := WriteSysctls("/proc/sys", append(node.Sysctls(), d.kernelSysctls...))
		return err
	})
	if err != nil {
		errs = append(errs, err)
	}
	t := ipvs.Timeouts{TCP: node.TCPTimeout, TCPFin: node.TCPFinTimeout, UDP: node.UDPTimeout}
	if t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		if _, err := withRetries(ctx, func() error { return d.ipvs.SetTimeouts(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: IPVS timeouts: %w", err))
		}
	}
	return errs
}

// inNamespace runs fn on a thread in the dataplane's network namespace:
// /proc/sys/net shows the namespace of the thread that opens it.
func (d *Dataplane) inNamespace(fn func() error) error {
	if d.cfg.NetNS == 0 {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// The thread is not unlocked, so the runtime discards it with its
		// namespace.
		runtime.LockOSThread()
		if err := unix.Setns(d.cfg.NetNS, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("dataplane: entering the network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// destroySet destroys a set, waiting out the references the deleted rules
// held: the kernel releases them after the rule transaction, not within it.
func (d *Dataplane) destroySet(ctx context.Context, name string) error {
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		err := d.sets.Destroy(ctx, name)
		if !errors.Is(err, ipset.ErrSetInUse) || wait > 5*time.Second {
			if errors.Is(err, ipset.ErrSetNotExist) {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Cleanup removes everything ipvsplane owns in the kernel, and nothing
// else: the virtual servers in its ownership sets, the dummy device, its
// rule tables and its sets.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	var errs []error
	owned := map[plan.Entry]bool{}
	for _, ipv6 := range []bool{false, true} {
		_, entries, err := d.sets.List(ctx, model.SetName(model.SetOwned, ipv6))
		if err != nil {
			continue
		}
		for _, e := range entries {
			owned[entryFromIPSet(e)] = true
		}
	}
	table, err := d.ipvs.Table(ctx)
	if err != nil {
		return fmt.Errorf("dataplane: reading the IPVS table: %w", err)
	}
	var b ipvs.Batch
	for _, vs := range table {
		if v, ok := virtualFromIPVS(vs.Service); ok && owned[v.OwnedEntry()] {
			b.DeleteService(vs.Service)
		}
	}
	if err := d.ipvs.Apply(ctx, &b); err != nil && !errors.Is(err, ipvs.ErrServiceNotExist) {
		errs = append(errs, err)
	}
	if err := d.links.Delete(ctx, d.cfg.Device); err != nil {
		errs = append(errs, err)
	}
	if err := nftrules.Delete(d.rules); err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.Sorted(maps.Keys(plan.SetSpecs())) {
		if err := d.destroySet(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	d.stopReread()
	d.programmed, d.device = nil, nil
	d.planner = plan.NewPlanner(nftrules.Render)
	return errors.Join(errs...)
}
