package nl

import (
	"errors"
	"fmt"
	"strings"
)

// The kernel packages report errors in one shape: an OpError per failed
// operation (Op, Object, Index, Err, Message and a sentinel) and a
// BatchError listing the failures of a batch. Each package declares its own
// types, so that their documentation and errors.As stay the package's;
// these helpers give them one text and one unwrapping.

// OpErrorText is the text of an operation's error:
//
//	pkg: op object: what the sentinel says (cause): the kernel's message
//
// The "pkg: " prefix that the sentinel, or a cause made from one, starts
// with is dropped. Without a sentinel the cause stands alone; with a
// sentinel but no cause, the sentinel does.
func OpErrorText(pkg, op, object string, sentinel, cause error, message string) string {
	var b strings.Builder
	b.WriteString(pkg + ": " + op)
	if object != "" {
		b.WriteString(" " + object)
	}
	b.WriteString(": ")
	trim := func(err error) string { return strings.TrimPrefix(fmt.Sprint(err), pkg+": ") }
	switch {
	case sentinel == nil:
		b.WriteString(trim(cause))
	case cause == nil:
		b.WriteString(trim(sentinel))
	default:
		b.WriteString(trim(sentinel) + " (" + trim(cause) + ")")
	}
	if message != "" {
		b.WriteString(": " + message)
	}
	return b.String()
}

// OpErrorUnwrap returns the sentinel, if any, and the cause, if any, so
// that errors.Is matches either.
func OpErrorUnwrap(sentinel, cause error) []error {
	var errs []error
	for _, err := range []error{sentinel, cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// batchShown is how many failures a batch error's text names.
const batchShown = 3

// BatchErrorText is the text of a batch's error: how many of its
// operations failed, and the first few failures without their "pkg: "
// prefix.
func BatchErrorText[E error](pkg string, failed []E, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d operations failed", pkg, len(failed), total)
	for i, err := range failed {
		if i == batchShown {
			fmt.Fprintf(&b, "; and %d more", len(failed)-batchShown)
			break
		}
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + strings.TrimPrefix(err.Error(), pkg+": "))
	}
	return b.String()
}

// BatchErrorUnwrap returns every failure, so that errors.Is matches if any
// failed so.
func BatchErrorUnwrap[E error](failed []E) []error {
	errs := make([]error, len(failed))
	for i, err := range failed {
		errs[i] = err
	}
	return errs
}

// ErrorDetail splits an exchange's error into the kernel's extended-ack
// message and the cause an OpError holds: the errno, for a kernel refusal.
func ErrorDetail(err error) (message string, cause error) {
	var ke *Error
	if errors.As(err, &ke) {
		return ke.Message, ke.Errno
	}
	return "", err
}
