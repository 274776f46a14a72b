package dataplane

import "context"

// turn lets a sync and the periodic reread's reader at the kernel one at a
// time: a sync (or prefill) takes it for its whole run, the reader for
// each of its requests, so the reader reads between syncs and a sync
// waits for one request at most. Overlapped, each slowed the other: at
// 10,000 services under churn in a guest of two CPUs, the syncs that ran
// beside a read took 0.3-1.7 s instead of 15-50 ms (both sides' requests
// contend for the IPVS mutex and the RTNL lock, and for the CPUs), and the
// dump of the device's addresses, which those syncs were changing, was
// interrupted on every attempt, so the read failed. A buffered channel,
// not a mutex, so that a reader waiting for its turn can give up when the
// sync that holds it stops the read; its waiting senders are served in
// order.
type turn chan struct{}

func newTurn() turn { return make(turn, 1) }

// take waits for the turn, or for ctx to end.
func (t turn) take(ctx context.Context) error {
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give hands the turn back.
func (t turn) give() { <-t }

// run calls fn in the turn; with a nil turn (a read the sync makes itself,
// or one no sync runs beside) it calls fn at once.
func (t turn) run(ctx context.Context, fn func() error) error {
	if t == nil {
		return fn()
	}
	if err := t.take(ctx); err != nil {
		return err
	}
	defer t.give()
	return fn()
}
