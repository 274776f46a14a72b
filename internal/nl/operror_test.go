package nl

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpErrorText(t *testing.T) {
	exist := errors.New("pkg: thing already exists")
	tests := []struct {
		object          string
		sentinel, cause error
		message, want   string
	}{
		{"a", exist, unix.EEXIST, "", "pkg: add a: thing already exists (file exists)"},
		{"a", exist, unix.EEXIST, "why", "pkg: add a: thing already exists (file exists): why"},
		{"", nil, unix.EPERM, "", "pkg: add: operation not permitted"},
		{"a", exist, nil, "", "pkg: add a: thing already exists"},
		{"a", nil, fmt.Errorf("%w: more", exist), "", "pkg: add a: thing already exists: more"},
	}
	for _, tt := range tests {
		if got := OpErrorText("pkg", "add", tt.object, tt.sentinel, tt.cause, tt.message); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	if got := OpErrorUnwrap(exist, nil); len(got) != 1 || got[0] != exist {
		t.Errorf("OpErrorUnwrap(sentinel, nil) = %v", got)
	}
}

func TestBatchErrorText(t *testing.T) {
	var failed []error
	for i := range 5 {
		failed = append(failed, fmt.Errorf("pkg: add %d: no", i))
	}
	want := "pkg: 5 of 9 operations failed: add 0: no; add 1: no; add 2: no; and 2 more"
	if got := BatchErrorText("pkg", failed, 9); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := BatchErrorUnwrap(failed); len(got) != 5 || got[4] != failed[4] {
		t.Errorf("BatchErrorUnwrap = %v", got)
	}
}

func TestErrorDetail(t *testing.T) {
	msg, cause := ErrorDetail(fmt.Errorf("x: %w", &Error{Errno: unix.ENOENT, Message: "why"}))
	if msg != "why" || cause != unix.ENOENT {
		t.Errorf("got %q, %v", msg, cause)
	}
	if msg, cause := ErrorDetail(unix.EPERM); msg != "" || cause != unix.EPERM {
		t.Errorf("got %q, %v", msg, cause)
	}
}
