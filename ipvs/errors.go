package ipvs

import (
	"errors"

	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Sentinel errors, matched with errors.Is. An error that wraps one of them
// also wraps the kernel's errno (unix.Errno): errors.Is(err,
// ErrServiceExist) and errors.Is(err, unix.EEXIST) both hold.
var (
	// ErrNotSupported: the kernel has no IPVS (module ip_vs not loaded, or
	// not built). The generic netlink family "IPVS" is missing.
	ErrNotSupported = errors.New("ipvs: IP virtual server not supported by this kernel")
	// ErrServiceExist: creating a service that exists (EEXIST).
	ErrServiceExist = errors.New("ipvs: service already exists")
	// ErrServiceNotExist: the operation names a service the kernel does not
	// have (ESRCH).
	ErrServiceNotExist = errors.New("ipvs: service does not exist")
	// ErrDestinationExist: creating a destination that exists (EEXIST).
	ErrDestinationExist = errors.New("ipvs: destination already exists")
	// ErrDestinationNotExist: updating or deleting a destination the
	// service does not have (ENOENT).
	ErrDestinationNotExist = errors.New("ipvs: destination does not exist")
	// ErrSchedulerNotSupported: the service names a scheduler or
	// persistence engine the kernel cannot load (ENOENT).
	ErrSchedulerNotSupported = errors.New("ipvs: scheduler or persistence engine not supported by this kernel")
)

// OpError is the failure of one operation. Its text reads "ipvs: create
// service TCP 10.0.0.1:80: service already exists (file exists)".
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

	sentinel error // one of the sentinels, or nil
}

func (e *OpError) Error() string {
	return nl.OpErrorText("ipvs", e.Op, e.Object, e.sentinel, e.Err, e.Message)
}

// Unwrap returns the sentinel, if any, and the cause, so that both
// errors.Is(err, ErrServiceExist) and errors.Is(err, unix.EEXIST) hold.
func (e *OpError) Unwrap() []error { return nl.OpErrorUnwrap(e.sentinel, e.Err) }

// BatchError reports the operations of a Batch that failed. The others
// were applied.
type BatchError struct {
	// Failed holds one error per failed operation, in batch order.
	Failed []*OpError
	// Total is the number of operations in the batch.
	Total int
}

func (e *BatchError) Error() string { return nl.BatchErrorText("ipvs", e.Failed, e.Total) }

// Unwrap returns every failure, so errors.Is matches if any failed so.
func (e *BatchError) Unwrap() []error { return nl.BatchErrorUnwrap(e.Failed) }
