package dataplane

import (
	"context"
	"errors"
	"iter"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// schedulerProbe is the virtual server kube-proxy creates to try a
// scheduler: an address from TEST-NET-2 (RFC 5737), which no node uses.
var schedulerProbe = ipvs.Service{Protocol: inet.TCP, Addr: netip.MustParseAddr("198.51.100.0"), Port: 20000}

// CheckScheduler checks that the kernel can give virtual servers the node's
// scheduler, as kube-proxy checks before it starts: nothing to do when a
// virtual server already uses it; otherwise it creates a probe virtual
// server (198.51.100.0:20000/TCP) with it, which makes the kernel load the
// scheduler's module if it can, and removes the probe again. An empty
// name means the node's default, rr.
func (d *Dataplane) CheckScheduler(ctx context.Context, name string) error {
	return d.k.checkScheduler(ctx, name)
}

func (k *kernel) checkScheduler(ctx context.Context, name string) error {
	if name == "" {
		name = (&model.Node{}).EffectiveScheduler()
	}
	svcs, err := k.ipvs.Services(ctx)
	if err != nil {
		return &checkError{op: "check IPVS scheduler", object: name, cause: err}
	}
	for _, s := range svcs {
		if string(s.Scheduler) == name {
			return nil
		}
	}
	probe := schedulerProbe
	probe.Scheduler = ipvs.Scheduler(name)
	err = k.ipvs.CreateService(ctx, probe)
	if errors.Is(err, unix.ENOENT) {
		// The kernel's answer to a scheduler it cannot find.
		return &checkError{op: "check IPVS scheduler", object: name, sentinel: ErrSchedulerNotSupported, cause: err,
			hint: "load its kernel module, ip_vs_" + name}
	}
	if err != nil {
		return &checkError{op: "check IPVS scheduler", object: name + " with a probe virtual server", cause: err}
	}
	if err := k.ipvs.DeleteService(ctx, probe); err != nil {
		return &checkError{op: "remove the probe virtual server of IPVS scheduler", object: name, cause: err}
	}
	return nil
}

// schedulerCache remembers which IPVS schedulers the kernel has, so that
// each distinct scheduler the services name is tried in the kernel once.
type schedulerCache struct {
	// probe tries a scheduler in the kernel: CheckScheduler.
	probe func(ctx context.Context, name string) error
	// known holds the answers: nil when the kernel has the scheduler.
	known map[string]error
}

// check tries the schedulers that service ports name (names) and that
// are not known yet,
// and tells the planner those the kernel lacks. The node's scheduler was
// checked at start, and a name that is unknown or that the node does not
// allow is never tried (see Node.Scheduling): trying one loads its module.
// A probe that fails otherwise is not remembered: its error is returned,
// and the scheduler is tried again with the next port that names it.
func (c *schedulerCache) check(ctx context.Context, p *planner.Planner, node *model.Node, names iter.Seq[string]) []error {
	var errs []error
	for name := range names {
		if name == node.EffectiveScheduler() || !model.KnownScheduler(name) || !node.SchedulerAllowed(name) {
			continue
		}
		if _, done := c.known[name]; done {
			continue
		}
		err := c.probe(ctx, name)
		switch {
		case err == nil:
			c.known[name] = nil
		case errors.Is(err, ErrSchedulerNotSupported):
			c.known[name] = err
			p.LackScheduler(name, err)
		default:
			errs = append(errs, err)
		}
	}
	return errs
}

// newPlanner returns an empty planner that knows the schedulers the
// kernel was found to lack and the virtual servers other programs made.
func (d *Dataplane) newPlanner() *planner.Planner {
	p := planner.NewPlanner(nftrules.Render)
	for name, err := range d.settings.schedulers.known {
		if err != nil {
			p.LackScheduler(name, err)
		}
	}
	p.SetForeign(d.ledger.foreign)
	return p
}
