package dataplane

import (
	"context"
	"fmt"
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
	if d.ledger.state != nil || d.reader.running != nil {
		return nil
	}
	return d.reader.start(ctx, nil, true)
}

// rereader runs the background reads of the kernel and decides when the
// next is due: the periodic reread every Config.ResyncInterval, and the
// canary's cheap look, between them, that finds an outside flush at once.
// It remembers the read under way, its connections (opened on the first
// read and kept), when the last read ended and how long it took, and when
// the kernel was last read or compared whole.
type rereader struct {
	cfg *Config
	ns  *namespace
	// turn keeps the reads' requests apart from the syncs.
	turn turn
	// running is the read under way; nil when none is.
	running *reread
	// background are the reads' connections; nil until the first.
	background kernelReaders
	// last is the last finished read's timing.
	last rereadTiming
	// lastFull is when the kernel was last read or compared whole.
	lastFull time.Time
	canary   canary
}

// start starts reading the kernel in the background, through connections
// of its own (a netlink connection serves one request at a time). It
// calls cfg.KernelRead when the read ends. The read outlives the sync that
// starts it: Close, Resync and the syncs that read the kernel themselves
// end it. The periodic reread (ahead false) gets the virtual servers
// programmed holds and those the ownership sets record; the read ahead of
// the first sync (see Dataplane.ReadAhead) reads everything, the
// leftovers too.
func (r *rereader) start(ctx context.Context, programmed *plan.KernelState, ahead bool) error {
	if r.background.ipvs == nil {
		b, err := dialReaders(r.ns, r.cfg.Binding)
		if err != nil {
			return err
		}
		r.background = b
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rr := &reread{cancel: cancel, done: make(chan struct{}), since: planner.NewScope(), ahead: ahead}
	readers, device, notify, now := r.background, r.cfg.Device, r.cfg.KernelRead, r.cfg.Now
	// The read ahead of the first sync runs beside nothing but prefills,
	// which only add, and compares everything: it reads at full speed.
	var periodic *periodicRead
	if !ahead {
		periodic = &periodicRead{turn: r.turn, known: slices.Collect(maps.Keys(programmed.Virtual))}
	}
	go func() {
		start := now()
		rr.retries, rr.err = withRetries(ctx, func() (err error) {
			rr.read, err = readKernel(ctx, readers, device, periodic)
			return err
		})
		rr.timing.ended = now()
		rr.timing.took = rr.timing.ended.Sub(start)
		// Done before the notice: the sync it asks for must find the
		// read ended, or it would leave the merge to the one after.
		close(rr.done)
		if notify != nil {
			notify()
		}
	}()
	r.running = rr
	return nil
}

// finished returns the background read if it has ended with something
// to merge, and forgets it. A read that failed is returned as an error; one
// during which the syncs compared everything is dropped, and the next
// read made due at once.
func (r *rereader) finished() (*reread, error) {
	rr := r.running
	if rr == nil {
		return nil, nil
	}
	select {
	case <-rr.done:
	default:
		return nil, nil
	}
	r.running, r.last = nil, rr.timing
	switch {
	case rr.err != nil:
		return nil, fmt.Errorf("dataplane: rereading the kernel: %w", rr.err)
	case rr.since.All:
		// Everything was compared with the programmed state meanwhile;
		// read again at once.
		r.lastFull = time.Time{}
		return nil, nil
	}
	return rr, nil
}

// ahead returns the read Dataplane.ReadAhead started, once it has ended,
// and forgets it; nil if there is none, or if ctx ends first (the sync
// then stops it and reads the kernel itself, which fails with ctx's
// error).
func (r *rereader) ahead(ctx context.Context) *reread {
	rr := r.running
	if rr == nil || !rr.ahead {
		return nil
	}
	select {
	case <-rr.done:
		r.running = nil
		if rr.err == nil {
			// The sync uses it: it times the next periodic read.
			r.last = rr.timing
		}
		return rr
	case <-ctx.Done():
		return nil
	}
}

// stop abandons a background read, waiting for its goroutine.
func (r *rereader) stop() {
	if r.running != nil {
		r.running.cancel()
		<-r.running.done
		r.running = nil
	}
}

// planned notes what a sync plans while a read runs: there the reader
// may or may not see the change.
func (r *rereader) planned(scope planner.Scope) {
	if r.running != nil {
		r.running.since.Merge(scope)
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

// due reports whether the periodic reread should start; not while one
// runs, nor while a sweep still compares the last.
func (r *rereader) due(sweeping bool) bool {
	now := r.cfg.Now()
	rested := r.last.took < rereadSlow || now.Sub(r.last.ended) >= rereadDutyFactor*r.last.took
	return r.running == nil && !sweeping && r.cfg.ResyncInterval > 0 && now.Sub(r.lastFull) >= r.cfg.ResyncInterval && rested
}

// close closes the background connections, if open.
func (r *rereader) close() error { return r.background.close() }
