package dataplane

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// canaryEvery is how often at most the canary looks. Under churn a sync
// may follow every change; the canary's requests were then a large part
// of each sync's cost, and an outside flush found a second later is
// repaired a second later.
const canaryEvery = time.Second

// canary checks cheaply, at most every canaryEvery, that the kernel still
// holds what the dataplane programmed. It remembers when it last looked
// and the ruleset generation at which the rules were last found current.
type canary struct {
	last     time.Time
	rulesGen uint32
}

// due reports whether the canary should look at now, and if so notes
// that it did.
func (c *canary) due(now time.Time) bool {
	if now.Sub(c.last) < canaryEvery {
		return false
	}
	c.last = now
	return true
}

// changedBehind reports whether the kernel no longer holds programmed,
// the dataplane's state: when the canary is due at now, it checks with a
// few requests whatever the cluster's size a member of each ownership
// set, one of its virtual servers, its device and its rule tables. An
// outside flush of any of them (ipvsadm -C, ipset flush, a deleted
// device, nft flush ruleset) makes it true, and the sync reads the kernel
// again at once instead of at the next full resync. When the canary is
// not due it is false.
func (c *canary) changedBehind(ctx context.Context, now time.Time, k *kernel, programmed *plan.KernelState, device string, node *model.Node) bool {
	if !c.due(now) {
		return false
	}
	for _, f := range inet.Families() {
		if !setIntact(ctx, k, programmed, model.SetName(model.SetOwned, f)) {
			return true
		}
	}
	for vk := range programmed.Virtual {
		if _, err := k.ipvs.GetService(ctx, ipvsKey(vk)); err != nil {
			return true
		}
		break
	}
	if len(programmed.Addresses) > 0 {
		if _, err := k.links.Get(ctx, device); err != nil {
			return true
		}
	}
	return !c.rulesCurrent(ctx, k, node)
}

// rulesCurrent reports whether ipvsplane's nftables rules are the ones
// the node's settings call for. Reading them back costs a dump of a
// chain's rules, decoded, on every sync; while the ruleset's generation
// has not moved since they were last found current, nothing in nftables
// has changed and they still are.
func (c *canary) rulesCurrent(ctx context.Context, k *kernel, node *model.Node) bool {
	gen, err := k.gen.Generation(ctx)
	if err == nil && gen != 0 && gen == c.rulesGen {
		return true
	}
	current, cerr := nftrules.Current(k.rules, node)
	if err == nil && cerr == nil && current {
		c.rulesGen = gen
	}
	return cerr == nil && current
}

// setIntact tests one of the members programmed holds for a set, or for
// a set it holds empty, that the set is there and empty. Counting a set's
// members would make the kernel walk all of it (it sizes the set's memory
// as it answers), which costs as much as the cluster is large on every
// sync.
func setIntact(ctx context.Context, k *kernel, programmed *plan.KernelState, name string) bool {
	for e := range programmed.Entries[name] {
		in, err := k.sets.Test(ctx, name, ipsetEntry(e))
		return err == nil && in
	}
	h, err := k.sets.Header(ctx, name)
	return err == nil && h.Entries == 0
}

// rulesetGeneration returns the nftables ruleset generation of c's network
// namespace (c: a NETLINK_NETFILTER connection). Every change to any
// table moves it, so while it stays where it was when the rules were last
// found current, they still are: a check that costs one small message
// instead of a dump of the rules.
func rulesetGeneration(ctx context.Context, c *nl.Conn) (uint32, error) {
	gen, err := readGeneration(ctx, c)
	if err != nil {
		return 0, fmt.Errorf("dataplane: reading the nftables ruleset generation: %w", err)
	}
	return gen, nil
}

func readGeneration(ctx context.Context, c *nl.Conn) (uint32, error) {
	r := &nl.Request{
		Type:  nl.NFType(unix.NFNL_SUBSYS_NFTABLES, unix.NFT_MSG_GETGEN),
		Flags: netlink.Acknowledge,
		Data:  nl.AppendNFGenMsg(nil, unix.AF_UNSPEC, nl.NFNetlinkV0),
	}
	if err := c.Exchange(ctx, r); err != nil {
		return 0, err
	}
	if r.Err != nil {
		return 0, r.Err
	}
	for _, m := range r.Replies {
		if uint16(m.Header.Type) != nl.NFType(unix.NFNL_SUBSYS_NFTABLES, unix.NFT_MSG_NEWGEN) || len(m.Data) < nl.NFGenMsgLen {
			continue
		}
		d := nl.NewReader(m.Data[nl.NFGenMsgLen:], "generation")
		for d.Next() {
			if d.Type() == unix.NFTA_GEN_ID {
				return d.BE32(), d.Err()
			}
		}
		if err := d.Err(); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("dataplane: no generation in nftables' answer: %w", unix.EBADMSG)
}
