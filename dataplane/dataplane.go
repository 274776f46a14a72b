package dataplane

import (
	"errors"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// DefaultDevice is the dummy device the virtual IPs are bound to, named as
// kube-proxy names it so that a node can move from one to the other.
const DefaultDevice = "kube-ipvs0"

// DefaultDrainTimeout is Config.DrainTimeout's default.
const DefaultDrainTimeout = 15 * time.Minute

// Config configures a [Dataplane]. The zero value is usable.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
	// Device is the dummy device for the virtual IPs; DefaultDevice if empty.
	Device string
	// Binding is how the virtual IPs are bound to the device: as its
	// addresses (the zero value, kube-proxy's way) or, for IPv4, as local
	// routes through it (see dummy.BindLocalRoutes). Bindings of the other
	// way, left by an earlier run, are removed after each full read.
	Binding dummy.Binding
	// DrainTimeout bounds how long a real server whose endpoint left keeps
	// draining at weight 0 while it still has connections;
	// DefaultDrainTimeout if zero.
	DrainTimeout time.Duration
	// ResyncInterval makes the dataplane read the kernel again when this
	// long has passed since the last full read, which repairs whatever
	// changed behind its back; 0 means only the first sync and those after
	// Resync read it. The read runs in the background, between syncs: a
	// sync waits for one of its requests at most, and the syncs after it
	// ends compare everything, a piece each (see Result.Sweeping). A
	// read that takes two seconds or more is followed by at least nine times
	// as long without one, so slow rereading takes at most a tenth of the
	// time.
	ResyncInterval time.Duration
	// KernelRead, if set, is called from another goroutine when a
	// background read of the kernel has ended. A caller that syncs only
	// when something changes should then ask for a sync, which merges it.
	KernelRead func()
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Dataplane programs the kernel of one network namespace: IPVS, the
// ipsets, the dummy device, the nftables rules and conntrack. It remembers
// what it programmed, so that after the first sync each sync costs what
// the change costs. A Dataplane is not safe for concurrent use: one
// goroutine runs its syncs.
type Dataplane struct {
	cfg Config
	// k is what talks to the kernel; the rest remembers.
	k       *kernel
	planner *planner.Planner
	// ledger is what was programmed and what is owed (see ledger).
	ledger *ledger
	// pending is what the next syncs must compare beyond their changes.
	pending pending
	// apply carries out the plans.
	apply applier
	// reader reads the kernel in the background.
	reader rereader
	// settings are the node kernel's facts and the settings written.
	settings nodeSettings
}

// New opens the netlink connections. It fails with an error matching
// ipvs.ErrNotSupported when the kernel has no IPVS.
func New(cfg *Config) (*Dataplane, error) {
	var netns int
	if cfg != nil {
		netns = cfg.NetNS
	}
	ns, err := hostNamespace(netns)
	if err != nil {
		return nil, err
	}
	return openDataplane(cfg, ns)
}

// openDataplane opens a Dataplane's connections in ns.
func openDataplane(cfg *Config, ns *namespace) (*Dataplane, error) {
	d := &Dataplane{planner: planner.NewPlanner(nftrules.Render)}
	if cfg != nil {
		d.cfg = *cfg
	}
	if d.cfg.Device == "" {
		d.cfg.Device = DefaultDevice
	}
	if d.cfg.DrainTimeout == 0 {
		d.cfg.DrainTimeout = DefaultDrainTimeout
	}
	if d.cfg.Now == nil {
		d.cfg.Now = time.Now
	}
	d.ledger = newLedger(d.cfg.Now)
	d.reader = rereader{cfg: &d.cfg, ns: ns, turn: newTurn()}
	var err error
	if d.settings.kernelSysctls, err = kernelSysctls(ns.Release); err != nil {
		return nil, err
	}
	err = ns.InProc(func(procSys, procNet string) (err error) {
		d.settings.ipv6, err = hasIPv6(procNet, procSys)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.k, err = openKernel(ns, d.cfg.Binding); err != nil {
		return nil, err
	}
	d.settings.schedulers = schedulerCache{probe: d.k.checkScheduler, known: map[string]error{}}
	d.apply = applier{k: d.k, ledger: d.ledger, cfg: &d.cfg, setIndex: map[string]uint16{}}
	return d, nil
}

// Close closes the connections.
func (d *Dataplane) Close() error {
	d.reader.stop()
	d.pending.stopSweep()
	return errors.Join(d.k.close(), d.reader.close())
}
