package watcher

import (
	"fmt"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// InvalidError says which object, and which field of it, could not be
// used. The object is skipped, or with Entry only the field's entry; the
// others are still programmed. It matches model.ErrInvalid with errors.Is.
type InvalidError struct {
	// File and Line locate the document in a manifest directory; empty and
	// 0 for objects that came from the API server.
	File string
	Line int
	// Kind is "Service", "EndpointSlice" or "Node"; empty when the
	// document could not be read as an object at all.
	Kind      string
	Namespace string
	Name      string
	// Field is the object's field as the API spells it, with indexes:
	// "spec.ports[1].port".
	Field  string
	Reason string
	// Entry is true when only the entry Field names (one address, one
	// source range, one endpoint) is left out and the rest of the object
	// is used, as kube-proxy reads such entries one by one.
	Entry bool
	// Err is the underlying parse error, if any.
	Err error
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	}
	if e.Kind != "" {
		b.WriteString(e.Kind)
		switch {
		case e.Namespace != "":
			b.WriteString(" " + e.Namespace + "/" + e.Name)
		case e.Name != "":
			b.WriteString(" " + e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Is makes errors.Is(err, model.ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == model.ErrInvalid }

func (e *InvalidError) Unwrap() error { return e.Err }

// fieldErrorFunc builds the error about one field of an object.
type fieldErrorFunc func(field, format string, args ...any) *InvalidError

// objectError returns a constructor of errors about one object.
func objectError(kind, namespace, name string) fieldErrorFunc {
	return func(field, format string, args ...any) *InvalidError {
		return &InvalidError{Kind: kind, Namespace: namespace, Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

// leftOut returns the error about one entry of an object that is left
// out while the rest of the object is used.
func (f fieldErrorFunc) leftOut(field, format string, args ...any) *InvalidError {
	e := f(field, format, args...)
	e.Entry = true
	return e
}
