package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// desired reads the source until Services and EndpointSlices are listed
// once, and returns the desired state. Objects that could not be used are
// returned as problems.
func (a *app) desired(ctx context.Context, log *zap.Logger, o *options, s *config.Settings) (*watcher.Update, []error, error) {
	ready := make(chan struct{}, 1)
	tracker := watcher.NewTracker(watcher.TrackerConfig{Node: s.Node, PodCIDRsFromNode: s.PodCIDRsFromNode, OnChange: func(inet.PerFamily[bool]) {
		select {
		case ready <- struct{}{}:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var problems []error
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- a.watch(ctx, log, o, nil, tracker, s.Node.Name, func(err error) {
			mu.Lock()
			problems = append(problems, err)
			mu.Unlock()
		})
	}()
	for !tracker.Synced() {
		select {
		case <-ready:
		case err := <-srcErr:
			if err == nil {
				err = errors.New("stopped before listing everything")
			}
			return nil, nil, fmt.Errorf("source %s: %w", o.source, err)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	cancel()
	<-srcErr
	return tracker.Sync(), problems, nil
}

// withDesired runs fn, the work of a one-shot command, with the kernel
// and the desired state once the source has been listed, within 30
// minutes.
func (a *app) withDesired(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command,
	fn func(ctx context.Context, k kernel, u *watcher.Update, problems []error) error) error {
	s, err := a.setup(log, o, cmd)
	if err != nil {
		return err
	}
	// The binding as the daemon's: apply would otherwise remove the
	// daemon's bindings as leftovers of the other mode.
	k, err := a.dial(&dataplane.Config{Binding: o.binding()})
	if err != nil {
		return err
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	u, problems, err := a.desired(ctx, log, o, s)
	if err != nil {
		return err
	}
	return fn(ctx, k, u, problems)
}

// apply syncs once. Objects left out and failed operations make it fail
// after everything else was programmed.
func (a *app) apply(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command) error {
	if err := a.checkKernel(); err != nil {
		return err
	}
	return a.withDesired(ctx, log, o, cmd, func(ctx context.Context, k kernel, u *watcher.Update, problems []error) error {
		if err := k.CheckScheduler(ctx, u.State.Node.Scheduler); err != nil {
			return err
		}
		start := a.now()
		res, err := k.Sync(ctx, &u.State)
		if err != nil {
			return err
		}
		// The source logged its own problems.
		for _, p := range res.Errors {
			log.Error("sync problem", zap.Error(p))
		}
		problems = append(problems, res.Errors...)
		log.Info("synced", zap.Int("operations", res.Plan.Len()), zap.Int("servicePorts", len(u.State.Services)),
			zap.Int("errors", len(problems)), zap.Duration("took", a.now().Sub(start)))
		if len(problems) > 0 {
			return fmt.Errorf("%d problems (logged above)", len(problems))
		}
		return nil
	})
}

// plan prints what a first sync would do against the kernel as it is.
func (a *app) plan(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command) error {
	if o.offline {
		return a.planOffline(ctx, log, o, cmd)
	}
	if len(o.nodeAddresses) > 0 {
		return errors.New("--node-addresses is for plan --offline; online the node's interfaces have them")
	}
	return a.withDesired(ctx, log, o, cmd, func(ctx context.Context, k kernel, u *watcher.Update, problems []error) error {
		p, left, err := k.DryRun(ctx, &u.State)
		if err != nil {
			return err
		}
		for _, e := range append(problems, left...) {
			log.Warn("problem", zap.Error(e))
		}
		if reconciles := reconcilesOf(p); len(reconciles) == p.Len() {
			fmt.Fprintln(a.stderr, "no changes: the kernel holds the desired state")
			if len(reconciles) > 0 {
				fmt.Fprintf(a.stderr, "a first sync also deletes conntrack's stale entries, as kube-proxy's does: %s\n", strings.Join(reconciles, ", "))
			}
			return nil
		}
		_, err = fmt.Fprint(a.stdout, p)
		return err
	})
}

// reconcilesOf returns the plan's conntrack reconciliations: a scan of
// the table that deletes what it finds stale, not a change the kernel's
// objects are known to need.
func reconcilesOf(p *plan.Plan) []string {
	var out []string
	for op := range p.All() {
		if r, ok := op.(plan.ReconcileFlows); ok {
			out = append(out, r.String())
		}
	}
	return out
}

// planOffline prints what a first sync would do on a node whose kernel
// holds nothing yet, computed without the kernel: no privileges, no IPVS.
// The node's addresses are --node-addresses, or else the Node manifest's.
func (a *app) planOffline(ctx context.Context, log *zap.Logger, o *options, cmd *cobra.Command) error {
	s, err := a.setup(log, o, cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	u, problems, err := a.desired(ctx, log, o, s)
	if err != nil {
		return err
	}
	state := u.State
	if len(state.Node.Addresses) == 0 {
		state.Node.Addresses = state.Node.NodeIPs
	}
	if len(state.Node.Addresses) == 0 && hasNodePorts(state.Services) {
		log.Warn("the node has no addresses, so node ports are left out of the plan: give --node-addresses, or name a Node manifest of the directory with --hostname-override",
			zap.String("node", state.Node.Name))
	}
	desired := plan.Build(&state, nftrules.Render)
	p := plan.Diff(plan.NewKernelState(), desired)
	for _, e := range append(problems, desired.Errors...) {
		log.Warn("problem", zap.Error(e))
	}
	if err := printFullPlan(a.stdout, p); err != nil {
		return err
	}
	// The settings every sync writes besides the plan (those that depend
	// on the kernel's release or CPU count are not known offline).
	for _, sc := range state.Node.Sysctls() {
		if _, err := fmt.Fprintf(a.stdout, "sysctl %s = %d\n", sc.Name, sc.Value); err != nil {
			return err
		}
	}
	return nil
}

// hasNodePorts reports whether any of the service ports has a node port.
func hasNodePorts(ports []model.ServicePort) bool {
	return slices.ContainsFunc(ports, func(p model.ServicePort) bool { return p.NodePort != 0 })
}

// printFullPlan prints a plan for review: as Plan.String, but with every
// set entry (one line each) and the rules table in full, indented.
func printFullPlan(w io.Writer, p *plan.Plan) error {
	var b strings.Builder
	for op := range p.All() {
		switch o := op.(type) {
		case plan.AddEntries:
			for _, e := range o.Entries {
				fmt.Fprintf(&b, "ipset add %s %s\n", o.Set, e)
			}
		case plan.ReplaceRules:
			fmt.Fprintf(&b, "%s:\n", o)
			for line := range strings.Lines(o.Rules) {
				b.WriteString("  " + line)
			}
		default:
			b.WriteString(op.String() + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
