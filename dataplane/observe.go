package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// kernelRead is what a read of the kernel found before it is narrowed to
// what ipvsplane owns: that needs the desired state, which only the
// sync's goroutine may look at, so a background read stops here.
type kernelRead struct {
	setTypes map[string]ipset.Type
	entries  map[string]map[plan.Entry]bool
	virtual  map[plan.VirtualKey]plan.VirtualServer
	reals    map[plan.VirtualKey]plan.Reals
	// device is false when the dummy device is missing.
	device bool
	addrs  map[netip.Addr]bool
	// leftovers are the device's bindings of the other binding mode.
	leftovers []netip.Addr
	// whole says every virtual server was listed, not only the periodic
	// read's.
	whole bool
}

// periodicRead is how the periodic reread reads: between syncs, each
// request in the turn, and of the IPVS table only the virtual servers
// known when it began and those the ownership sets record (see
// readTable).
type periodicRead struct {
	turn  turn
	known []plan.VirtualKey
}

// readKernel reads ipvsplane's sets and their entries, every virtual
// server with its real servers, and the addresses on the device. A read
// that compares everything (periodic nil) also reads the device's
// bindings of the other binding mode; the periodic reread reads as
// periodic says.
func readKernel(ctx context.Context, r kernelReaders, device string, periodic *periodicRead) (*kernelRead, error) {
	var t turn
	if periodic != nil {
		t = periodic.turn
	}
	k := &kernelRead{
		setTypes: map[string]ipset.Type{},
		entries:  map[string]map[plan.Entry]bool{},
		virtual:  map[plan.VirtualKey]plan.VirtualServer{},
		reals:    map[plan.VirtualKey]plan.Reals{},
		addrs:    map[netip.Addr]bool{},
		whole:    periodic == nil,
	}
	if err := k.readSets(ctx, r.sets, t); err != nil {
		return nil, err
	}
	if err := k.readTable(ctx, r.ipvs, periodic); err != nil {
		return nil, fmt.Errorf("reading the IPVS table: %w", err)
	}
	var dev *dummy.Device
	var addrs []netip.Addr
	err := t.run(ctx, func() (err error) {
		if dev, err = r.links.Get(ctx, device); err != nil {
			return err
		}
		addrs, err = dev.Addresses(ctx)
		return err
	})
	switch {
	case errors.Is(err, dummy.ErrLinkNotExist):
		return k, nil
	case err != nil:
		return nil, err
	}
	k.device = true
	for _, a := range addrs {
		// Link-local addresses are the kernel's own.
		if !a.IsLinkLocalUnicast() {
			k.addrs[a] = true
		}
	}
	// A node may switch binding modes between runs. What the device holds
	// bound the other way was bound by ipvsplane, or by kube-proxy on its
	// kube-ipvs0, so it is a virtual IP like the addresses above; the
	// planner sees only this mode's bindings, so these are removed apart
	// from the plan (unbindLeftovers), once this mode's are bound. A
	// switch needs a restart, so only the reads that compare everything
	// look: in address mode this dumps every IPv4 route, which the
	// periodic background read would pay for nothing.
	if periodic != nil {
		return k, nil
	}
	left, err := dev.Leftovers(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range left {
		if !a.IsLinkLocalUnicast() {
			k.leftovers = append(k.leftovers, a)
		}
	}
	return k, nil
}

// readSets reads ipvsplane's sets and their entries, a set a turn.
func (k *kernelRead) readSets(ctx context.Context, sets *ipset.Conn, t turn) error {
	var names []string
	err := t.run(ctx, func() (err error) {
		names, err = sets.Names(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("listing ipsets: %w", err)
	}
	specs := planner.SetSpecs()
	for _, name := range names {
		if _, ours := specs[name]; !ours {
			continue
		}
		var h ipset.Header
		var entries []ipset.Entry
		err := t.run(ctx, func() (err error) {
			h, entries, err = sets.List(ctx, name)
			return err
		})
		if errors.Is(err, ipset.ErrSetNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading ipset %s: %w", name, err)
		}
		k.setTypes[name] = h.Type
		k.entries[name] = make(map[plan.Entry]bool, len(entries))
		for _, e := range entries {
			k.entries[name][entryFromIPSet(e)] = true
		}
	}
	return nil
}

// tableStep is how many virtual servers a turn's read of the IPVS table
// gets, with their real servers: some milliseconds under emulation.
const tableStep = 16

// readTable reads the IPVS table. A read that compares everything lists
// every virtual server, over several sockets (ipvs.Conn.Table). The
// periodic reread gets the virtual servers known (what the syncs programmed when the read began)
// and those the ownership sets record, tableStep a turn, with their real
// servers: the kernel lists services with a single dump, which took up to
// a second at 10,000 services under emulation and would hold the syncs
// back all that time, and resumes it by position, so that it cannot be
// cut into turns either (a sync adding or removing a service between two
// parts shifts the rest). Any other virtual server is another program's,
// which the periodic read leaves alone; the reads that compare everything
// (the first, and the canary's) still look at every one, to adopt those
// the desired state names. A sync that creates or deletes one meanwhile
// puts it in the reread's scope, where the programmed state stands.
func (k *kernelRead) readTable(ctx context.Context, conn *ipvs.Conn, periodic *periodicRead) error {
	if periodic == nil {
		table, err := conn.Table(ctx)
		if err != nil {
			return err
		}
		for _, vs := range table {
			k.addVirtual(vs.Service, vs.Destinations)
		}
		return nil
	}
	keys := k.ownedKeys(periodic.known)
	for lo := 0; lo < len(keys); lo += tableStep {
		err := periodic.turn.run(ctx, func() error {
			for _, vk := range keys[lo:min(lo+tableStep, len(keys))] {
				svc, err := conn.GetService(ctx, ipvsKey(vk))
				if errors.Is(err, ipvs.ErrServiceNotExist) {
					continue
				}
				if err != nil {
					return err
				}
				ds, err := conn.Destinations(ctx, svc)
				if err != nil {
					return err
				}
				k.addVirtual(svc, ds)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// addVirtual records a kernel virtual server that may be ipvsplane's.
func (k *kernelRead) addVirtual(svc ipvs.Service, dests []ipvs.Destination) {
	if v, ok := virtualFromIPVS(svc); ok {
		k.virtual[v.VirtualKey] = v
		k.reals[v.VirtualKey] = realsFromIPVS(dests)
	}
}

// ownedKeys returns known and the virtual servers the sets read record as
// ipvsplane's, once each.
func (k *kernelRead) ownedKeys(known []plan.VirtualKey) []plan.VirtualKey {
	seen := make(map[plan.VirtualKey]bool, len(known))
	keys := make([]plan.VirtualKey, 0, len(known))
	add := func(vk plan.VirtualKey) {
		if !seen[vk] {
			seen[vk] = true
			keys = append(keys, vk)
		}
	}
	for _, vk := range known {
		add(vk)
	}
	for _, f := range inet.Families() {
		for e := range k.entries[model.SetName(model.SetOwned, f)] {
			add(plan.VirtualKey{Addr: e.Addr, Port: e.Port, Protocol: e.Protocol})
		}
	}
	return keys
}

// owned narrows a read to what ipvsplane owns: its sets of the node's
// families, the virtual servers recorded in its ownership sets and those
// the desired state names, which it adopts (a node taken over from
// kube-proxy keeps its virtual servers), and the addresses on its device.
// With adoptAll it keeps every virtual server: a prefill's desired state
// is partial, and which ones the whole state adopts is known only to the
// sync after it (see dropUnowned); a prefill only adds, and never
// touches one it holds. The read's maps are taken over, not copied.
func (k *kernelRead) owned(desired *plan.KernelState, node *model.Node, adoptAll bool) (*plan.KernelState, error) {
	s := plan.NewKernelState()
	for name, typ := range k.setTypes {
		spec, ours := desired.Sets[name]
		if !ours {
			continue
		}
		if typ != ipset.Type(spec.Type) {
			return nil, fmt.Errorf("ipset %s exists with type %s, want %s; remove it or run ipvsplane cleanup", name, typ, spec.Type)
		}
		s.Sets[name] = spec
		s.Entries[name] = k.entries[name]
	}
	s.Virtual, s.Reals, s.Addresses = k.virtual, k.reals, k.addrs
	if !adoptAll {
		dropUnowned(s, desired, node)
	}
	return s, nil
}

// foreign returns the virtual servers of a whole read that another
// program made (keepalived, kube-vip): neither ipvsplane's ownership sets
// record them, nor kube-proxy's sets of cluster IPs, external IPs and
// load-balancer addresses, which mark those its IPVS mode made and a
// takeover adopts, nor the state programmed before the read (nil at
// the first), which keeps what ipvsplane made its own when someone
// flushed the sets. Nil when there is none.
func (k *kernelRead) foreign(programmed *plan.KernelState) map[plan.VirtualKey]bool {
	var out map[plan.VirtualKey]bool
	for vk := range k.virtual {
		e := vk.OwnedEntry()
		f := inet.FamilyOf(vk.Addr)
		if slices.ContainsFunc(claimSets, func(set string) bool { return k.entries[model.SetName(set, f)][e] }) {
			continue
		}
		if programmed != nil {
			if _, ours := programmed.Virtual[vk]; ours {
				continue
			}
		}
		if out == nil {
			out = map[plan.VirtualKey]bool{}
		}
		out[vk] = true
	}
	return out
}

// claimSets are the sets whose address and port entries record who made a
// virtual server: ipvsplane's ownership set, and the sets kube-proxy's
// IPVS mode fills for every virtual server of a cluster IP, external IP
// or load-balancer address.
var claimSets = []string{model.SetOwned, model.SetClusterIP, model.SetExternalIP, model.SetExternalIPLocal, model.SetLoadBalancer}

// ownershipSets are the entries of a state's ownership sets, one per
// family; nil for a set it lacks.
type ownershipSets struct {
	inet.PerFamily[map[plan.Entry]bool]
}

// ownershipOf returns s's ownership sets.
func ownershipOf(s *plan.KernelState) ownershipSets {
	var o ownershipSets
	for _, f := range inet.Families() {
		*o.Of(f) = s.Entries[model.SetName(model.SetOwned, f)]
	}
	return o
}

// has reports whether either set holds e.
func (o ownershipSets) has(e plan.Entry) bool { return o.Get(inet.IPv4)[e] || o.Get(inet.IPv6)[e] }

// ownsVirtual reports whether ipvsplane owns virtual server vk: the
// desired state names it, or the ownership sets (owned) record it and it
// is outside the node's excluded ranges, where what ipvsplane does not
// want is never removed. Another program's is neither.
func ownsVirtual(owned ownershipSets, desired *plan.KernelState, node *model.Node, vk plan.VirtualKey) bool {
	if _, wanted := desired.Virtual[vk]; wanted {
		return true
	}
	return owned.has(vk.OwnedEntry()) && !slices.ContainsFunc(node.ExcludeCIDRs, func(p netip.Prefix) bool { return p.Contains(vk.Addr) })
}

// dropUnowned removes from s, read whole for a prefill (owned's
// adoptAll) and added to since, the virtual servers ipvsplane does not
// own by the whole desired state.
func dropUnowned(s *plan.KernelState, desired *plan.KernelState, node *model.Node) {
	owned := ownershipOf(s)
	for vk := range s.Virtual {
		if !ownsVirtual(owned, desired, node, vk) {
			delete(s.Virtual, vk)
			delete(s.Reals, vk)
		}
	}
}

// observe narrows a read of the kernel to what ipvsplane owns (see
// kernelRead.owned); a nil read is a whole read made now through the
// sync's connections. It adds what is read through those: the device,
// whether its rule tables are in place, which is small, and the iptables
// chains kube-proxy left, which it removes once its own rules are. A
// whole read also tells the ledger the other programs' virtual servers.
func (d *Dataplane) observe(ctx context.Context, read *kernelRead, desired *plan.KernelState, node *model.Node, adoptAll bool) (*plan.KernelState, error) {
	if read == nil {
		var err error
		if read, err = readKernel(ctx, d.k.kernelReaders, d.cfg.Device, nil); err != nil {
			return nil, err
		}
	}
	if read.whole {
		// Before owned, which takes the read's maps over.
		d.ledger.foreign = read.foreign(d.ledger.state)
	}
	k, err := read.owned(desired, node, adoptAll)
	if err != nil {
		return nil, err
	}
	if read.leftovers != nil {
		d.ledger.leftovers = read.leftovers
	}
	if err := d.apply.findDevice(ctx, read.device); err != nil {
		return nil, err
	}
	current, err := nftrules.Current(d.k.rules, node)
	if err != nil {
		return nil, err
	}
	if current {
		k.Rules = nftrules.Render(node)
	}
	if k.KubeProxyChains, err = findKubeProxyChains(d.k.rules); err != nil {
		return nil, err
	}
	return k, nil
}
