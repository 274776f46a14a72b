package dummy

import (
	"errors"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Errors callers can match with errors.Is. An [OpError] carrying one of
// them also carries the kernel's errno where there was one.
var (
	// ErrLinkNotExist means no link of the given name exists (ENODEV).
	ErrLinkNotExist = errors.New("dummy: link does not exist")
	// ErrLinkNotDummy means a link of the given name exists but is not a
	// dummy device; it is never changed or deleted.
	ErrLinkNotDummy = errors.New("dummy: link is not a dummy device")
	// ErrNotSupported means the kernel has no dummy driver.
	ErrNotSupported = errors.New("dummy: dummy devices are not supported by this kernel, built without CONFIG_DUMMY")
)

// OpError is the failure of one operation. Its text reads "dummy: bind
// 10.96.0.1 on kube-ipvs0: operation not permitted".
type OpError struct {
	// Op is the operation: "dial", "ensure", "get", "delete", "bind", "unbind" or
	// "list".
	Op string
	// Object names what it was asked of: the link, or for bind and unbind
	// "10.96.0.1 on kube-ipvs0".
	Object string
	// Index is the address's position in the slice given to BindAll or
	// UnbindAll; 0 for other operations.
	Index int
	// Err is the cause, usually a unix.Errno from the kernel.
	Err error
	// Message is the kernel's extended acknowledgement text, if it sent one.
	Message string

	sentinel error // one of the sentinels, or nil
}

func (e *OpError) Error() string {
	return nl.OpErrorText("dummy", e.Op, e.Object, e.sentinel, e.Err, e.Message)
}

// Unwrap returns the sentinel and the cause, so errors.Is matches either
// (for example ErrLinkNotExist and unix.ENODEV).
func (e *OpError) Unwrap() []error { return nl.OpErrorUnwrap(e.sentinel, e.Err) }

// BatchError lists the failures of BindAll or UnbindAll, each an *OpError
// with its Index; the other addresses were bound or unbound.
type BatchError struct {
	// Failed holds one error per failed address, in the addresses' order.
	Failed []*OpError
	// Total is the number of addresses given.
	Total int
}

func (e *BatchError) Error() string { return nl.BatchErrorText("dummy", e.Failed, e.Total) }

// Unwrap returns every failure, so errors.Is matches if any failed so.
func (e *BatchError) Unwrap() []error { return nl.BatchErrorUnwrap(e.Failed) }

// sentinelError carries a sentinel and the error behind it until opError
// turns them into an *OpError.
type sentinelError struct {
	sentinel error
	err      error
}

func (e sentinelError) Error() string   { return e.sentinel.Error() }
func (e sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }

// opError wraps err for the operation op on link, and on addr if it is
// valid.
func opError(op, link string, addr netip.Addr, err error) *OpError {
	e := &OpError{Op: op, Object: link}
	if addr.IsValid() {
		e.Object = addr.String() + " on " + link
	}
	var se sentinelError
	if errors.As(err, &se) {
		e.sentinel, err = se.sentinel, se.err
	}
	e.Message, e.Err = nl.ErrorDetail(err)
	return e
}
