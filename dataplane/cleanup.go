package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// destroySet destroys a set, waiting out the references the deleted rules
// held: the kernel releases them after the rule transaction, not within it.
func (k *kernel) destroySet(ctx context.Context, name string) error {
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		err := k.sets.Destroy(ctx, name)
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

// Cleanup removes everything ipvsplane owns in the kernel: the virtual
// servers in its ownership sets, the dummy device, its rule tables and its
// sets; and, as kube-proxy's --cleanup does, the iptables chains and
// nftables tables kube-proxy left (in iptables-nft), which a takeover
// removes too. Nothing else: other programs' virtual servers, chains and
// tables stay.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	var errs []error
	owned := map[plan.Entry]bool{}
	for _, f := range inet.Families() {
		_, entries, err := d.k.sets.List(ctx, model.SetName(model.SetOwned, f))
		if err != nil {
			continue
		}
		for _, e := range entries {
			owned[entryFromIPSet(e)] = true
		}
	}
	table, err := d.k.ipvs.Table(ctx)
	if err != nil {
		return fmt.Errorf("dataplane: reading the IPVS table: %w", err)
	}
	var b ipvs.Batch
	for _, vs := range table {
		if v, ok := virtualFromIPVS(vs.Service); ok && owned[v.OwnedEntry()] {
			b.DeleteService(vs.Service)
		}
	}
	if err := d.k.ipvs.Apply(ctx, &b); err != nil && !errors.Is(err, ipvs.ErrServiceNotExist) {
		errs = append(errs, err)
	}
	if err := d.k.links.Delete(ctx, d.cfg.Device); err != nil {
		errs = append(errs, err)
	}
	if err := nftrules.Delete(d.k.rules); err != nil {
		errs = append(errs, err)
	}
	// Before the sets: kube-proxy's IPVS-mode rules refer to them.
	if err := removeKubeProxyLeftovers(d.k.rules); err != nil {
		errs = append(errs, err)
	}
	for _, name := range slices.Sorted(maps.Keys(planner.SetSpecs())) {
		if err := d.k.destroySet(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	d.reader.stop()
	d.ledger.state, d.apply.device = nil, nil
	d.planner = d.newPlanner()
	return errors.Join(errs...)
}

// Handover gives the node back to kube-proxy: it removes ipvsplane's own
// rule tables and its ownership sets, and leaves the virtual and real
// servers, the dummy device with its addresses and the KUBE-* sets, which
// kube-proxy adopts as they are, so open connections survive. Run it once
// kube-proxy's rules are in place (its first sync is done): until then
// ipvsplane's rules are the node's only ones. Virtual IPs bound as local
// routes (see Config.Binding), which kube-proxy does not know, become
// addresses, whatever this Dataplane's Binding: `ipvsplane cleanup
// --handover` does not know the daemon's.
func (d *Dataplane) Handover(ctx context.Context) error {
	var errs []error
	if err := nftrules.Delete(d.k.rules); err != nil {
		errs = append(errs, err)
	}
	if err := d.k.routesToAddresses(ctx, d.cfg.Device); err != nil {
		errs = append(errs, err)
	}
	for _, f := range inet.Families() {
		if err := d.k.destroySet(ctx, model.SetName(model.SetOwned, f)); err != nil {
			errs = append(errs, err)
		}
	}
	d.reader.stop()
	d.ledger.state, d.apply.device = nil, nil
	d.planner = d.newPlanner()
	return errors.Join(errs...)
}

// routesToAddresses binds the virtual IPs that are local routes as
// addresses of the device, then removes the routes: kube-proxy would never
// remove a route, and a stale one keeps a deleted service's address local.
func (k *kernel) routesToAddresses(ctx context.Context, device string) error {
	c, err := k.ns.DialLinks(dummy.BindAddresses)
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	defer c.Close()
	dev, err := c.Get(ctx, device)
	if errors.Is(err, dummy.ErrLinkNotExist) {
		return nil
	}
	var routes []netip.Addr
	if err == nil {
		// In address mode the routes are the leftovers.
		routes, err = dev.Leftovers(ctx)
	}
	if err == nil {
		err = dev.BindAll(ctx, routes)
	}
	if err == nil {
		err = dev.UnbindLeftovers(ctx, routes)
	}
	if err != nil {
		return fmt.Errorf("dataplane: turning local routes into addresses: %w", err)
	}
	return nil
}
