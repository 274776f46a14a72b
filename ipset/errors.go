package ipset

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Sentinel errors, matched with errors.Is. The errno the kernel returned
// stays reachable too: errors.Is(err, unix.ENOENT) works alongside
// errors.Is(err, ErrSetNotExist).
var (
	ErrSetNotExist      = errors.New("set does not exist")
	ErrSetExist         = errors.New("set already exists")
	ErrEntryExist       = errors.New("entry already in the set")
	ErrEntryNotExist    = errors.New("entry not in the set")
	ErrSetFull          = errors.New("set is full")
	ErrTypeNotSupported = errors.New("set type not supported by this kernel")
	ErrTypeMismatch     = errors.New("sets have different types or families")
	ErrSetInUse         = errors.New("set is in use")
	ErrOutOfRange       = errors.New("entry is out of the set's range")
	ErrInvalidEntry     = errors.New("entry does not fit the set")
	ErrProtocol         = errors.New("ipset protocol error")
)

// OpError is the error of one operation on one set.
type OpError struct {
	// Op names the operation: "create", "add", "list"...
	Op string
	// Set is the set's name, empty for operations on no set.
	Set string
	// Entry is the entry concerned, if any, in ipset save syntax.
	Entry string
	// Err is the kernel's errno (a unix.Errno) or another cause.
	Err error
	// Message is the kernel's extended acknowledgement text, if it sent one.
	Message  string
	sentinel error
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("ipset " + e.Op)
	if e.Set != "" {
		b.WriteString(" " + e.Set)
	}
	if e.Entry != "" {
		b.WriteString(" " + e.Entry)
	}
	b.WriteString(": ")
	if e.sentinel != nil {
		b.WriteString(e.sentinel.Error() + ": ")
	}
	if errno, ok := e.Err.(unix.Errno); ok && errno >= 4096 {
		fmt.Fprintf(&b, "ipset errno %d", int(errno))
	} else {
		b.WriteString(e.Err.Error())
	}
	if e.Message != "" {
		b.WriteString(" (" + e.Message + ")")
	}
	return b.String()
}

// Unwrap returns the sentinel, when one applies, and the cause.
func (e *OpError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.Err}
	}
	return []error{e.sentinel, e.Err}
}

// opError wraps err from the kernel for the operation op on set. typ, when
// known, tells the type-specific error numbers apart.
func opError(op, set string, typ Type, err error) error {
	if err == nil {
		return nil
	}
	oe := &OpError{Op: op, Set: set, Err: err}
	var nerr *nl.Error
	if errors.As(err, &nerr) {
		oe.Message = nerr.Message
		oe.Err = nerr.Errno
	}
	if errno, ok := oe.Err.(unix.Errno); ok {
		oe.sentinel = sentinel(op, typ, errno)
	}
	return oe
}

// sentinel maps the kernel's answer to a sentinel. The kernel reuses
// IPSET_ERR_EXIST for "already there" and "not there", and the type-specific
// numbers mean different things for hashes and bitmaps.
func sentinel(op string, typ Type, errno unix.Errno) error {
	switch errno {
	case unix.ENOENT:
		return ErrSetNotExist
	case unix.EEXIST, errExistSetName:
		return ErrSetExist
	case errExist:
		if op == "delete" {
			return ErrEntryNotExist
		}
		return ErrEntryExist
	case errFindType:
		return ErrTypeNotSupported
	case errTypeMismatch:
		return ErrTypeMismatch
	case errBusy, errReferenced, unix.EBUSY:
		return ErrSetInUse
	case errProtocol:
		return ErrProtocol
	case errInvalidCIDR, errInvalidFam, errIPv4, errIPv6, errTimeout, errCounter, errComment:
		return ErrInvalidEntry
	case errTypeSpecific:
		if typ == BitmapPort {
			return ErrOutOfRange
		}
		if typ.isHash() {
			return ErrSetFull
		}
	case errHashElem, errInvalidProto, errMissingProto:
		if typ.isHash() {
			return ErrInvalidEntry
		}
		return ErrOutOfRange
	}
	return nil
}

// EntryError is the error of one entry in a bulk operation.
type EntryError struct {
	// Index is the entry's position in the slice given to the operation.
	Index int
	Entry Entry
	Err   error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("entry %d (%s): %v", e.Index, e.Entry, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// BulkError lists the entries a bulk operation could not apply; every
// other entry was applied.
type BulkError struct {
	Op, Set string
	Entries []*EntryError
}

func (e *BulkError) Error() string {
	const shown = 3
	var b strings.Builder
	fmt.Fprintf(&b, "ipset %s %s: %d entries failed", e.Op, e.Set, len(e.Entries))
	for i, ee := range e.Entries {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Entries)-shown)
			break
		}
		b.WriteString("; " + ee.Error())
	}
	return b.String()
}

// Unwrap returns every entry's error, so errors.Is finds a sentinel that any
// of them carries.
func (e *BulkError) Unwrap() []error {
	errs := make([]error, len(e.Entries))
	for i, ee := range e.Entries {
		errs[i] = ee
	}
	return errs
}
