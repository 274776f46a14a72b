package dataplane

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// reread is a periodic read of the whole kernel running in the
// background, between syncs (see turn). At 10,000 services it takes
// seconds (tens under emulation); syncs go on meanwhile, and the first
// sync after it ends merges what it read, which that sync and those after
// it compare a piece each (planner.Sweep).
type reread struct {
	cancel context.CancelFunc
	done   chan struct{}
	// read, err and retries are the reader's result, set before done is
	// closed.
	read    *kernelRead
	err     error
	retries int
	// since holds what the syncs planned while the read ran. There the
	// reader may have seen the kernel before or after a change, so the
	// programmed state is believed instead.
	since *planner.Scope
	// timing is when the read ended and how long it took, set before
	// done is closed.
	timing rereadTiming
	// ahead marks the first sync's read, started by ReadAhead: it reads
	// the leftovers too, and the first sync waits for it.
	ahead bool
}

// rereadTiming is when a background read ended and how long it took.
type rereadTiming struct {
	ended time.Time
	took  time.Duration
}

// startReread starts reading the kernel in the background, through
// connections of its own (a netlink connection serves one request at a
// time). It calls cfg.KernelRead when the read ends. The read outlives
// the sync that starts it: Close, Resync and the syncs that read the
// kernel themselves end it.
func (d *Dataplane) startReread(ctx context.Context) error {
	return d.startRead(ctx, false)
}

// ReadAhead starts the first sync's read of the kernel in the
// background, so that it overlaps what the caller does before that sync:
// a daemon's listing of its cluster's services, seconds at 10,000 of them,
// and the read of a kernel that already holds them, tens of seconds under
// emulation. The first Sync then waits for the read instead of reading
// itself. It is for a caller that knows nothing else changes the
// dataplane's objects in between (a daemon that restarts, a node whose
// previous proxy has stopped): such a change is found by the next full
// read, not by the first sync. It does nothing once a sync has read the
// kernel.
func (d *Dataplane) ReadAhead(ctx context.Context) error {
	if d.programmed != nil || d.reread != nil {
		return nil
	}
	return d.startRead(ctx, true)
}

// startRead starts a background read; ahead makes it the first sync's.
func (d *Dataplane) startRead(ctx context.Context, ahead bool) error {
	if d.background.ipvs == nil {
		r, err := dialReaders(d.k.ns, d.cfg.Binding)
		if err != nil {
			return err
		}
		d.background = r
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &reread{cancel: cancel, done: make(chan struct{}), since: planner.NewScope(), ahead: ahead}
	readers, device, notify, now := d.background, d.cfg.Device, d.cfg.KernelRead, d.cfg.Now
	// The read ahead of the first sync runs beside nothing but prefills,
	// which only add, and compares everything: it reads at full speed.
	var periodic *periodicRead
	if !ahead {
		periodic = &periodicRead{turn: d.turn, known: slices.Collect(maps.Keys(d.programmed.Virtual))}
	}
	go func() {
		start := now()
		r.retries, r.err = withRetries(ctx, func() (err error) {
			r.read, err = readKernel(ctx, readers, device, periodic)
			return err
		})
		r.timing.ended = now()
		r.timing.took = r.timing.ended.Sub(start)
		// Done before the notice: the sync it asks for must find the
		// read ended, or it would leave the merge to the one after.
		close(r.done)
		if notify != nil {
			notify()
		}
	}()
	d.reread = r
	return nil
}

// finishedReread returns the background read if it has ended, and forgets
// it.
func (d *Dataplane) finishedReread() *reread {
	r := d.reread
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		d.reread, d.lastReread = nil, r.timing
		return r
	default:
		return nil
	}
}

// readAhead returns the read ReadAhead started, once it has ended, and
// forgets it; nil if there is none, or if ctx ends first (the sync then
// stops it and reads the kernel itself, which fails with ctx's error).
func (d *Dataplane) readAhead(ctx context.Context) *reread {
	r := d.reread
	if r == nil || !r.ahead {
		return nil
	}
	select {
	case <-r.done:
		d.reread = nil
		return r
	case <-ctx.Done():
		return nil
	}
}

// stopReread abandons a background read, waiting for its goroutine.
func (d *Dataplane) stopReread() {
	if d.reread != nil {
		d.reread.cancel()
		<-d.reread.done
		d.reread = nil
	}
}

// mergeRead returns what the kernel holds according to a background read,
// except where the syncs planned changes while it ran: there the
// programmed state stands. Both inputs are taken over.
func mergeRead(observed, programmed *plan.KernelState, since planner.Scope) *plan.KernelState {
	for vk := range since.Virtual {
		if v, ok := programmed.Virtual[vk]; ok {
			observed.Virtual[vk], observed.Reals[vk] = v, programmed.Reals[vk]
		} else {
			delete(observed.Virtual, vk)
			delete(observed.Reals, vk)
		}
	}
	for a := range since.Addresses {
		if programmed.Addresses[a] {
			observed.Addresses[a] = true
		} else {
			delete(observed.Addresses, a)
		}
	}
	for set, entries := range since.Entries {
		have := observed.Entries[set]
		if have == nil {
			continue // the set is gone: a full compare makes it again
		}
		for e := range entries {
			if programmed.Entries[set][e] {
				have[e] = true
			} else {
				delete(have, e)
			}
		}
	}
	return observed
}

// rereadDutyFactor bounds the time the periodic reread takes: after a
// read that took t, at least rereadSlow, the next starts no sooner than
// rereadDutyFactor x t after it ended. At 10,000 services under emulation
// a read took 10-40 s of one CPU; with reads every ResyncInterval of 30 s
// the reader would never rest and the syncs would share the CPU with it
// all the time. A shorter read is not held back: it costs little, and the
// repairs it brings keep to the interval.
const (
	rereadDutyFactor = 9
	rereadSlow       = 2 * time.Second
)

// resyncDue reports whether the periodic reread should start.
func (d *Dataplane) resyncDue() bool {
	now := d.cfg.Now()
	last := d.lastReread
	rested := last.took < rereadSlow || now.Sub(last.ended) >= rereadDutyFactor*last.took
	return d.reread == nil && d.sweep == nil && d.cfg.ResyncInterval > 0 && now.Sub(d.lastFull) >= d.cfg.ResyncInterval && rested
}
