package ipset

import (
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Sentinel errors, matched with errors.Is. The errno the kernel returned
// stays reachable too: errors.Is(err, unix.ENOENT) holds alongside
// errors.Is(err, ErrSetNotExist).
var (
	ErrSetNotExist      = errors.New("ipset: set does not exist")
	ErrSetExist         = errors.New("ipset: set already exists")
	ErrEntryExist       = errors.New("ipset: entry already in the set")
	ErrEntryNotExist    = errors.New("ipset: entry not in the set")
	ErrSetFull          = errors.New("ipset: set is full")
	ErrTypeNotSupported = errors.New("ipset: set type not supported")
	ErrTypeMismatch     = errors.New("ipset: sets have different types or families")
	ErrSetInUse         = errors.New("ipset: set is in use")
	ErrEntryOutOfRange  = errors.New("ipset: entry is out of the set's range")
	ErrEntryInvalid     = errors.New("ipset: entry does not fit the set")
	// ErrProtocolMismatch: the kernel could not read a message, or speaks
	// no version of the ipset netlink protocol this package does.
	ErrProtocolMismatch = errors.New("ipset: kernel and package disagree on the ipset protocol")
)

// OpError is the failure of one operation. Its text reads like the ipset(8)
// command that failed: "ipset: add kube 10.0.0.1,tcp:80: entry already in
// the set (errno 4352)".
type OpError struct {
	// Op names the operation: "create", "add", "list"...
	Op string
	// Object names what it was asked of: the set, followed by the entry
	// in ipset save syntax when there is one ("kube 10.0.0.1,tcp:80");
	// empty for operations on no set.
	Object string
	// Index is the entry's position in the slice given to AddEntries or
	// DeleteEntries; 0 for other operations.
	Index int
	// Err is the kernel's errno (a unix.Errno) or another cause.
	Err error
	// Message is the kernel's extended acknowledgement text, if it sent one.
	Message string

	sentinel error // one of the sentinels, or nil
}

func (e *OpError) Error() string {
	return nl.OpErrorText("ipset", e.Op, e.Object, e.sentinel, e.Err, e.Message)
}

// Unwrap returns the sentinel, when one applies, and the cause.
func (e *OpError) Unwrap() []error { return nl.OpErrorUnwrap(e.sentinel, e.Err) }

// BatchError lists the entries AddEntries or DeleteEntries could not
// apply, each an *OpError with its Index; every other entry was applied.
type BatchError struct {
	// Failed holds one error per failed entry, in the entries' order.
	Failed []*OpError
	// Total is the number of entries given.
	Total int
}

func (e *BatchError) Error() string { return nl.BatchErrorText("ipset", e.Failed, e.Total) }

// Unwrap returns every failure, so errors.Is finds a sentinel that any of
// them carries.
func (e *BatchError) Unwrap() []error { return nl.BatchErrorUnwrap(e.Failed) }

// typeError is a set type this package cannot encode. It matches
// ErrTypeNotSupported; its text has no "ipset: " of its own, as the error
// that wraps it starts so.
type typeError Type

func (t typeError) Error() string {
	return fmt.Sprintf("set type %q not supported by this package", string(t))
}

func (t typeError) Is(target error) bool { return target == ErrTypeNotSupported }

// opError wraps err from the kernel for the operation op on object. typ,
// when known, tells the type-specific error numbers apart.
func opError(op, object string, typ Type, err error) error {
	if err == nil {
		return nil
	}
	oe := &OpError{Op: op, Object: object}
	oe.Message, oe.Err = nl.ErrorDetail(err)
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
		return ErrProtocolMismatch
	case errInvalidCIDR, errInvalidFam, errIPv4, errIPv6, errTimeout, errCounter, errComment:
		return ErrEntryInvalid
	case errTypeSpecific:
		if typ == BitmapPort {
			return ErrEntryOutOfRange
		}
		if typ.isHash() {
			return ErrSetFull
		}
	case errHashElem, errInvalidProto, errMissingProto:
		if typ.isHash() {
			return ErrEntryInvalid
		}
		return ErrEntryOutOfRange
	}
	return nil
}
