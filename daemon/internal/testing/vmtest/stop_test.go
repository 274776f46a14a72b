package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// vmtest's limit passes before go test kills it, which is at the test's
// timeout plus a minute or a tenth (44 minutes for make test-vm's 40), so
// that vmtest, not go test, ends a stuck guest and says where it was.
func TestRunLimitComesBeforeGoTestsKill(t *testing.T) {
	for _, tt := range []struct {
		timeout, goKill, limit time.Duration
	}{
		{40 * time.Second, 100 * time.Second, 70 * time.Second},
		{10 * time.Minute, 11 * time.Minute, 10*time.Minute + 30*time.Second},
		{40 * time.Minute, 44 * time.Minute, 43*time.Minute + 30*time.Second},
	} {
		if got := goTestKill(tt.timeout); got != tt.goKill {
			t.Errorf("go test kills a test of -timeout %v after %v, not %v", tt.timeout, tt.goKill, got)
		}
		got, err := runLimit([]string{"-test.v=true", "-test.timeout=" + tt.timeout.String()})
		if err != nil || got != tt.limit {
			t.Errorf("limit for -test.timeout=%v: %v, %v; want %v", tt.timeout, got, err, tt.limit)
		}
	}
	if got, _ := runLimit(nil); got != defaultLimit {
		t.Errorf("limit without a timeout: %v", got)
	}
	t.Setenv("VMTEST_TIMEOUT", "90s")
	if got, err := runLimit([]string{"-test.timeout=40m0s"}); err != nil || got != 90*time.Second {
		t.Errorf("VMTEST_TIMEOUT=90s: %v, %v", got, err)
	}
	t.Setenv("VMTEST_TIMEOUT", "soon")
	if _, err := runLimit(nil); err == nil || !strings.Contains(err.Error(), "VMTEST_TIMEOUT") {
		t.Errorf("VMTEST_TIMEOUT=soon: %v", err)
	}
}

// A stopped guest is asked for a goroutine dump when its cause grants a
// grace, and killed when the grace passes or at once without one; a guest
// that exits in time is not killed.
func TestStopGuest(t *testing.T) {
	for _, tt := range []struct {
		name        string
		grace       time.Duration
		exits       bool
		wantRequest bool
		wantKill    bool
	}{
		{"limit, the test dumps and ends", time.Minute, true, true, false},
		{"limit, the guest stays stuck", 50 * time.Millisecond, false, true, true},
		{"SIGTERM", 0, false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(&stopError{why: "because", dumpGrace: tt.grace})
			var log guestLog
			log.start()
			log.testLine("=== RUN   TestStuck")
			exited := make(chan struct{})
			input := &testutil.LockedBuffer{}
			var killed atomic.Bool
			done := make(chan *consoleResult)
			go func() { done <- stopGuest(ctx, exited, input, &log, func() { killed.Store(true) }) }()
			if tt.exits {
				for !strings.Contains(input.String(), quitRequest) {
					time.Sleep(time.Millisecond)
				}
				close(exited)
			}
			res := <-done
			if got := input.String() == quitRequest+"\n"; got != tt.wantRequest {
				t.Errorf("asked for a dump: %q", input.String())
			}
			if killed.Load() != tt.wantKill {
				t.Errorf("killed: %v, want %v", killed.Load(), tt.wantKill)
			}
			if res == nil || res.runningTests() != "running TestStuck" {
				t.Errorf("stopGuest returned %+v", res)
			}
		})
	}
	exited := make(chan struct{})
	close(exited)
	if res := stopGuest(context.Background(), exited, nil, &guestLog{}, func() { t.Error("killed") }); res != nil {
		t.Errorf("a guest that exited was stopped: %+v", res)
	}
}

// SIGTERM ends the run's context at once, with no grace for a dump; the
// limit ends it with one.
func TestStopContext(t *testing.T) {
	ctx, stop := stopContext(time.Hour)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	var e *stopError
	if !errors.As(context.Cause(ctx), &e) || e.why != "vmtest got terminated" || e.dumpGrace != 0 {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	ctx, stop = stopContext(time.Millisecond)
	defer stop()
	<-ctx.Done()
	if !errors.As(context.Cause(ctx), &e) || !strings.Contains(e.why, "limit of 1ms passed") || e.dumpGrace != limitDumpGrace {
		t.Errorf("cause %v", context.Cause(ctx))
	}
}
