package dataplane

import (
	"context"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
)

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
