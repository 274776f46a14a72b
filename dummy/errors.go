package dummy

import (
	"errors"
	"fmt"
	"net/netip"
)

// Errors callers can match with errors.Is. An [Error] carrying one of them
// also carries the kernel's errno where there was one.
var (
	// ErrLinkNotFound means no link of the given name exists.
	ErrLinkNotFound = errors.New("link not found")
	// ErrWrongKind means a link of the given name exists but is not a
	// dummy device; it is never changed or deleted.
	ErrWrongKind = errors.New("link is not a dummy device")
	// ErrNotSupported means the kernel has no dummy driver.
	ErrNotSupported = errors.New("dummy devices are not supported by this kernel (CONFIG_DUMMY)")
)

// Error says which operation failed on which link and address.
type Error struct {
	Op   string     // "ensure", "delete", "bind", "unbind", "list"
	Link string     // the link's name
	Addr netip.Addr // the address, for bind and unbind
	// Kind is one of the package's sentinel errors, or nil.
	Kind error
	// Err is the underlying error, usually a unix.Errno from the kernel.
	Err error
}

func (e *Error) Error() string {
	what := e.Link
	if e.Addr.IsValid() {
		what = fmt.Sprintf("%s on %s", e.Addr, e.Link)
	}
	switch {
	case e.Kind != nil && e.Err != nil:
		return fmt.Sprintf("dummy: %s %s: %v: %v", e.Op, what, e.Kind, e.Err)
	case e.Kind != nil:
		return fmt.Sprintf("dummy: %s %s: %v", e.Op, what, e.Kind)
	default:
		return fmt.Sprintf("dummy: %s %s: %v", e.Op, what, e.Err)
	}
}

// Unwrap returns the sentinel and the underlying error, so errors.Is matches
// either (for example ErrLinkNotFound and unix.ENODEV).
func (e *Error) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
