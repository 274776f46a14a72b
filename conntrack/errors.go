package conntrack

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Sentinels that errors from this package wrap, for errors.Is. The kernel's
// errno stays reachable too: errors.Is(err, unix.ENOENT) holds as well.
var (
	// ErrNotExist: the entry is not in the table.
	ErrNotExist = errors.New("conntrack entry does not exist")
	// ErrExist: an entry with the same tuple is already in the table.
	ErrExist = errors.New("conntrack entry already exists")
	// ErrInterrupted: a dump was interrupted by table changes on every
	// attempt.
	ErrInterrupted = errors.New("conntrack dump interrupted repeatedly")
)

// OpError is the error of one operation on one object.
type OpError struct {
	// Op is the operation: "dump", "get", "create", "delete", "flush",
	// "count" or "dial".
	Op string
	// Object names what the operation was about: a tuple, a filter, a
	// family.
	Object string
	// Err is the cause; for a kernel refusal, an error holding the
	// unix.Errno and any extended-ack message.
	Err error
}

func (e *OpError) Error() string {
	s := "conntrack " + e.Op
	if e.Object != "" {
		s += " " + e.Object
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the package sentinel matching the errno, if any, and Err.
func (e *OpError) Unwrap() []error {
	switch {
	case errors.Is(e.Err, unix.ENOENT):
		return []error{ErrNotExist, e.Err}
	case errors.Is(e.Err, unix.EEXIST):
		return []error{ErrExist, e.Err}
	}
	return []error{e.Err}
}

func opError(op, object string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Object: object, Err: err}
}
