package conntrack

import (
	"errors"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Sentinels that errors from this package wrap, for errors.Is. The kernel's
// errno stays reachable too: errors.Is(err, unix.ENOENT) holds as well.
var (
	// ErrFlowNotExist: the entry is not in the table (ENOENT).
	ErrFlowNotExist = errors.New("conntrack: flow does not exist")
	// ErrFlowExist: an entry with the same tuple is already in the table
	// (EEXIST).
	ErrFlowExist = errors.New("conntrack: flow already exists")
	// ErrDumpInterrupted: a dump was interrupted by table changes on every
	// attempt.
	ErrDumpInterrupted = errors.New("conntrack: dump interrupted repeatedly")
	// ErrFilterEmpty: a Filter with no field set that is not All():
	// deleting everything must be asked for by name.
	ErrFilterEmpty = errors.New("conntrack: filter selects nothing; use conntrack.All() to select every entry")
)

// OpError is the failure of one operation. Its text reads "conntrack:
// delete udp 10.0.0.1:5353->10.96.0.10:53: flow does not exist (no such
// file or directory)".
type OpError struct {
	// Op is the operation: "dump", "get", "create", "delete", "flush",
	// "count" or "dial".
	Op string
	// Object names what the operation was about: a tuple, a filter, a
	// family.
	Object string
	// Index is the flow's position among those given to Create; 0 for
	// other operations.
	Index int
	// Err is the cause: the kernel's unix.Errno, a validation error, or the
	// context's error when the call was cancelled.
	Err error
	// Message is the kernel's extended acknowledgement text, if it sent one.
	Message string

	sentinel error // one of the sentinels, or nil
}

func (e *OpError) Error() string {
	return nl.OpErrorText("conntrack", e.Op, e.Object, e.sentinel, e.Err, e.Message)
}

// Unwrap returns the sentinel, if any, and the cause, so that both
// errors.Is(err, ErrFlowNotExist) and errors.Is(err, unix.ENOENT) hold.
func (e *OpError) Unwrap() []error { return nl.OpErrorUnwrap(e.sentinel, e.Err) }

// opError wraps err, if any, for the operation op on object.
func opError(op, object string, err error) error {
	if err == nil {
		return nil
	}
	oe := &OpError{Op: op, Object: object}
	oe.Message, oe.Err = nl.ErrorDetail(err)
	switch {
	case errors.Is(oe.Err, unix.ENOENT):
		oe.sentinel = ErrFlowNotExist
	case errors.Is(oe.Err, unix.EEXIST):
		oe.sentinel = ErrFlowExist
	}
	return oe
}
