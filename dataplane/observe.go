package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/ipset"
)

// observe reads what ipvsplane owns in the kernel: its sets and their
// entries, the virtual servers recorded in its ownership sets (and those
// the desired state names, which it adopts: a node taken over from
// kube-proxy keeps its virtual servers), the addresses on its device, and
// whether its rule tables are in place, and the iptables chains kube-proxy
// left, which it removes once its own rules are.
func (d *Dataplane) observe(ctx context.Context, desired *KernelState, node *Node) (*KernelState, error) {
	k := NewKernelState()
	names, err := d.sets.Names(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ipsets: %w", err)
	}
	for _, name := range names {
		spec, ours := desired.Sets[name]
		if !ours {
			continue
		}
		h, entries, err := d.sets.List(ctx, name)
		if errors.Is(err, ipset.ErrSetNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading ipset %s: %w", name, err)
		}
		if h.Type != ipset.Type(spec.Type) {
			return nil, fmt.Errorf("ipset %s exists with type %s, want %s; remove it or run ipvsplane cleanup", name, h.Type, spec.Type)
		}
		k.Sets[name] = spec
		k.Entries[name] = make(map[string]bool, len(entries))
		for _, e := range entries {
			k.Entries[name][e.String()] = true
		}
	}

	owned := map[string]bool{}
	for _, set := range []string{SetName(SetOwned, false), SetName(SetOwned, true)} {
		for e := range k.Entries[set] {
			owned[e] = true
		}
	}
	table, err := d.ipvs.Table(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the IPVS table: %w", err)
	}
	for _, vs := range table {
		v, ok := virtualFromIPVS(vs.Service)
		if !ok {
			continue
		}
		_, wanted := desired.Virtual[v.VirtualKey]
		if !owned[portEntry(v.Addr, v.Protocol, v.Port)] && !wanted {
			continue // another program's
		}
		if !wanted && node.excluded(v.Addr) {
			continue // never removed
		}
		k.Virtual[v.VirtualKey] = v
		k.Reals[v.VirtualKey] = realsFromIPVS(vs.Destinations)
	}

	dev, err := d.links.Get(ctx, d.cfg.Device)
	switch {
	case errors.Is(err, dummy.ErrLinkNotFound):
		d.device = nil
	case err != nil:
		return nil, err
	default:
		addrs, err := dev.Addresses(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			// Link-local addresses are the kernel's own.
			if !a.IsLinkLocalUnicast() {
				k.Addresses[a] = true
			}
		}
		d.device = dev
	}

	current, err := tablesCurrent(d.rules, node)
	if err != nil {
		return nil, err
	}
	if current {
		k.Rules = renderRules(node)
	}
	if k.KubeProxyChains, err = findKubeProxyChains(d.rules); err != nil {
		return nil, err
	}
	return k, nil
}

// excluded reports whether addr is in ExcludeCIDRs, whose virtual servers
// are never removed.
func (n *Node) excluded(addr netip.Addr) bool {
	return slices.ContainsFunc(n.ExcludeCIDRs, func(p netip.Prefix) bool { return p.Contains(addr) })
}
