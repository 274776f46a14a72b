package dataplane

import (
	"context"
	"errors"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"golang.org/x/sys/unix"
)

// The kernel refuses a request for a moment when it is short of memory
// (ENOMEM), when a reply did not fit the socket's buffer (ENOBUFS), or
// when something else holds what the request needs (EBUSY); the same
// request a little later usually succeeds. A sync tries such failures
// again a few times, waiting longer each time, before it leaves them to
// the next sync.
const (
	retryAttempts = 6
	retryFirst    = 10 * time.Millisecond
	retryMax      = 640 * time.Millisecond
)

// transientErrnos are the errnos worth trying again at once.
func transientErrno(errno unix.Errno) bool {
	switch errno {
	case unix.ENOBUFS, unix.EBUSY, unix.ENOMEM, unix.EAGAIN, unix.EINTR:
		return true
	}
	return false
}

// transient reports whether err carries an errno that a retry may cure.
func transient(err error) bool {
	var errno unix.Errno
	return errors.As(err, &errno) && transientErrno(errno)
}

// anyTransient reports whether any of the errors is transient.
func anyTransient(errs []error) bool {
	for _, err := range errs {
		if transient(err) {
			return true
		}
	}
	return false
}

// backoff is the wait before retry number attempt (from 0): doubling from
// retryFirst, capped at retryMax.
func backoff(attempt int) time.Duration {
	// retryFirst<<6 is retryMax; the inner min keeps the shift in range.
	return min(retryFirst<<min(attempt, 6), retryMax)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// withRetries runs fn, and again after a backoff while it fails with a
// transient errno, at most retryAttempts more times. It returns fn's last
// error and how many retries it took.
func withRetries(ctx context.Context, fn func() error) (int, error) {
	err := fn()
	n := 0
	for ; n < retryAttempts && transient(err); n++ {
		if serr := sleep(ctx, backoff(n)); serr != nil {
			return n, err
		}
		err = fn()
	}
	return n, err
}

// applied is what carrying out a sync's plan did.
type applied struct {
	// errs are the failures of the last round (see applyRetrying), and
	// then of unbinding the leftovers.
	errs []error
	// rounds counts the rounds that tried failed operations again.
	rounds int
	flows  FlowCleanup
}

// applyRetrying carries out a plan, then plans again and carries out the
// operations that failed while any failure is transient, with a backoff
// between rounds. The operations of every round are added to the plan;
// the failures of the last round are returned, and stay planned for the
// next sync.
func (a *applier) applyRetrying(ctx context.Context, pl *plan.Plan, t target) applied {
	var out applied
	out.errs = a.apply(ctx, pl, t, &out.flows)
	for ; out.rounds < retryAttempts && anyTransient(out.errs); out.rounds++ {
		if sleep(ctx, backoff(out.rounds)) != nil {
			break
		}
		again := a.ledger.diff(t, a.ledger.takeRetry(), a.cfg.DrainTimeout)
		pl.Append(again)
		out.errs = a.apply(ctx, again, t, &out.flows)
	}
	return out
}
