package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ENOBUFS", unix.ENOBUFS, true},
		{"EBUSY", unix.EBUSY, true},
		{"ENOMEM", unix.ENOMEM, true},
		{"EAGAIN", unix.EAGAIN, true},
		{"EINTR", unix.EINTR, true},
		{"ENOENT", unix.ENOENT, false},
		{"EINVAL", unix.EINVAL, false},
		{"wrapped in an ipvs error", &ipvs.OpError{Op: "create service", Err: unix.ENOMEM}, true},
		{"an unknown scheduler", &ipvs.OpError{Op: "create service", Err: unix.ENOENT}, false},
		{"in a dummy batch", &dummy.BatchError{Failed: []*dummy.OpError{{Op: "bind", Object: "10.96.0.1 on kube-ipvs0", Err: unix.ENOBUFS}}, Total: 1}, true},
		{"in an operation's error", &OpError{Op: Bind{Addr: netip.MustParseAddr("10.96.0.1")}, Err: fmt.Errorf("x: %w", unix.EBUSY)}, true},
		{"no errno", errors.New("broken"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.want {
				t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if !anyTransient([]error{unix.EINVAL, unix.ENOBUFS}) || anyTransient([]error{unix.EINVAL}) || anyTransient(nil) {
		t.Error("anyTransient")
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 640, 640}
	var total time.Duration
	for i, w := range want {
		if got := backoff(i); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
		if i < retryAttempts {
			total += backoff(i)
		}
	}
	// All the retries of one sync wait well under a second in all.
	if total > time.Second {
		t.Errorf("the retries of a sync wait %v", total)
	}
}

func TestWithRetries(t *testing.T) {
	tests := []struct {
		name        string
		errs        []error // the results of successive calls; nil after
		wantCalls   int
		wantRetries int
		wantErr     error
	}{
		{"success", nil, 1, 0, nil},
		{"a permanent error is not retried", []error{unix.ENOENT}, 1, 0, unix.ENOENT},
		{"transient then success", []error{unix.ENOBUFS, unix.EBUSY}, 3, 2, nil},
		{"transient then permanent", []error{unix.ENOMEM, unix.EINVAL}, 2, 1, unix.EINVAL},
		{"transient throughout gives up", []error{unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS},
			retryAttempts + 1, retryAttempts, unix.ENOBUFS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			n, err := withRetries(context.Background(), func() error {
				calls++
				if calls <= len(tt.errs) {
					return tt.errs[calls-1]
				}
				return nil
			})
			if calls != tt.wantCalls || n != tt.wantRetries || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("%d calls, %d retries, %v; want %d, %d, %v", calls, n, err, tt.wantCalls, tt.wantRetries, tt.wantErr)
			}
		})
	}
}

// A cancelled context ends the retries at once, with the last error.
func TestWithRetriesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	n, err := withRetries(ctx, func() error { calls++; return unix.EBUSY })
	if calls != 1 || n != 0 || !errors.Is(err, unix.EBUSY) {
		t.Errorf("%d calls, %d retries, %v", calls, n, err)
	}
}
