package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// beforeGoKill is how long before go test's own kill of vmtest its limit
// passes, so that vmtest stops the guest and says what it was doing
// before go test ends vmtest without a word.
const beforeGoKill = 30 * time.Second

// defaultLimit is a run's limit when neither VMTEST_TIMEOUT nor
// -test.timeout sets it.
const defaultLimit = 30 * time.Minute

// quitRequest is the line on the test's console that makes the guest's
// init send the test SIGQUIT, for a goroutine dump (initScript).
const quitRequest = "vmtest-quit"

// Grace periods for the guest's test to print its goroutine dump and end
// before vmtest kills the guest: when its limit passes (at most
// beforeGoKill) and when go test asks for the dump with SIGQUIT (go test
// kills vmtest 5 s later at the soonest).
const (
	limitDumpGrace = 15 * time.Second
	quitDumpGrace  = 3 * time.Second
)

// goTestKill is when go test kills a test binary run with -test.timeout
// timeout: a minute later, or a tenth of the timeout if that is longer
// (cmd/go's testKillTimeout).
func goTestKill(timeout time.Duration) time.Duration {
	return timeout + max(time.Minute, timeout/10)
}

// runLimit is the limit of the whole run: VMTEST_TIMEOUT, or beforeGoKill
// before go test's kill for the test's -test.timeout.
func runLimit(args []string) (time.Duration, error) {
	if v := os.Getenv("VMTEST_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("VMTEST_TIMEOUT=%q: not a positive duration", v)
		}
		return d, nil
	}
	limit := defaultLimit
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				limit = goTestKill(d) - beforeGoKill
			}
		}
	}
	return limit, nil
}

// stopError is why a run was stopped before its guest ended, and how long
// the guest's test has to print its goroutine dump.
type stopError struct {
	why       string
	dumpGrace time.Duration
}

func (e *stopError) Error() string { return e.why }

// stopContext returns a context that ends with the cause a *stopError when
// limit passes or vmtest gets SIGQUIT (go test's, after its timeout),
// SIGTERM or SIGINT; stop releases it and the signals.
func stopContext(limit time.Duration) (ctx context.Context, stop func()) {
	ctx, cancelLimit := context.WithTimeoutCause(context.Background(), limit,
		&stopError{why: fmt.Sprintf("its limit of %v passed (VMTEST_TIMEOUT)", limit), dumpGrace: limitDumpGrace})
	ctx, cancel := context.WithCancelCause(ctx)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case sig := <-signals:
			e := &stopError{why: "vmtest got " + sig.String()}
			if sig == syscall.SIGQUIT {
				e.dumpGrace = quitDumpGrace
			}
			cancel(e)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		cancel(nil)
		cancelLimit()
	}
}

// stopGuest waits until the guest has exited or ctx ends. In the latter
// case it says why and which tests were running, asks the guest's test
// for a goroutine dump and waits the cause's grace for the guest to end,
// then kills it, and returns what the guest had told when ctx ended.
func stopGuest(ctx context.Context, exited <-chan struct{}, input io.Writer, log *guestLog, kill func()) *consoleResult {
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
	}
	res := log.result()
	var stop *stopError
	if !errors.As(context.Cause(ctx), &stop) {
		stop = &stopError{why: context.Cause(ctx).Error()}
	}
	// Said at once: go test may kill vmtest during the grace.
	fmt.Fprintf(os.Stderr, "vmtest: stopping the guest: %v; %s\n", stop, res.runningTests())
	if stop.dumpGrace > 0 && !res.booted.IsZero() {
		fmt.Fprintf(os.Stderr, "vmtest: asking the guest's test for a goroutine dump (SIGQUIT), up to %v\n", stop.dumpGrace)
		if _, err := io.WriteString(input, quitRequest+"\n"); err == nil {
			select {
			case <-exited:
				return &res
			case <-time.After(stop.dumpGrace):
			}
		}
	}
	kill()
	return &res
}
