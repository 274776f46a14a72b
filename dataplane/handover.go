package dataplane

import (
	"context"
	"errors"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
)

// Handover gives the node back to kube-proxy: it removes ipvsplane's own
// rule tables and its ownership sets, and leaves the virtual and real
// servers, the dummy device with its addresses and the KUBE-* sets, which
// kube-proxy adopts as they are, so open connections survive. Run it once
// kube-proxy's rules are in place (its first sync is done): until then
// ipvsplane's rules are the node's only ones.
func (d *Dataplane) Handover(ctx context.Context) error {
	var errs []error
	if err := nftrules.Delete(d.rules); err != nil {
		errs = append(errs, err)
	}
	for _, ipv6 := range []bool{false, true} {
		if err := d.destroySet(ctx, model.SetName(model.SetOwned, ipv6)); err != nil {
			errs = append(errs, err)
		}
	}
	d.stopReread()
	d.programmed, d.device = nil, nil
	d.planner = plan.NewPlanner(nftrules.Render)
	return errors.Join(errs...)
}
