package ipvs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, matched with errors.Is. An error that wraps one of them
// also wraps the kernel's errno (unix.Errno).
var (
	// ErrNotAvailable: the kernel has no IPVS (module ip_vs not loaded, or
	// not built). The generic netlink family "IPVS" is missing.
	ErrNotAvailable = errors.New("ipvs: IP virtual server not available in this kernel")
	// ErrServiceExists: creating a service that exists (EEXIST).
	ErrServiceExists = errors.New("ipvs: service already exists")
	// ErrServiceNotExist: the operation names a service the kernel does not
	// have (ESRCH).
	ErrServiceNotExist = errors.New("ipvs: service does not exist")
	// ErrDestinationExists: creating a destination that exists (EEXIST).
	ErrDestinationExists = errors.New("ipvs: destination already exists")
	// ErrDestinationNotExist: updating or deleting a destination the
	// service does not have (ENOENT).
	ErrDestinationNotExist = errors.New("ipvs: destination does not exist")
	// ErrNoScheduler: the service names a scheduler or persistence engine
	// the kernel cannot load (ENOENT).
	ErrNoScheduler = errors.New("ipvs: scheduler or persistence engine not available")
)

// OpError is the failure of one operation.
type OpError struct {
	// Op says what was asked: "create service", "delete destination", ...
	Op string
	// Object names what it was asked of: "TCP 10.0.0.1:80", or for a
	// destination "TCP 10.0.0.1:80 -> 10.1.0.5:8080".
	Object string
	// Index is the operation's position in its Batch; 0 outside a batch.
	Index int
	// Err is the cause: the kernel's unix.Errno, a validation error, or the
	// context's error when the call was cancelled.
	Err error
	// Message is the kernel's extended acknowledgement text, if it sent one.
	Message string

	kind error // one of the sentinels, or nil
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("ipvs: ")
	b.WriteString(e.Op)
	if e.Object != "" {
		b.WriteString(" ")
		b.WriteString(e.Object)
	}
	b.WriteString(": ")
	if e.kind != nil {
		fmt.Fprintf(&b, "%s (%v)", strings.TrimPrefix(e.kind.Error(), "ipvs: "), e.Err)
	} else {
		fmt.Fprint(&b, e.Err)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the sentinel, if any, and the cause, so that both
// errors.Is(err, ErrServiceExists) and errors.Is(err, unix.EEXIST) hold.
func (e *OpError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.Err}
	}
	return []error{e.kind, e.Err}
}

// BatchError reports the operations of a Batch that failed. The others
// were applied.
type BatchError struct {
	// Failed holds one error per failed operation, in batch order.
	Failed []*OpError
	// Total is the number of operations in the batch.
	Total int
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("ipvs: %d of %d operations failed; first: %v", len(e.Failed), e.Total, e.Failed[0])
}

// Unwrap returns every failure, so errors.Is matches if any failed so.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}
