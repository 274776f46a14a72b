package ipvs

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// opKind is a change an op makes.
type opKind uint8

const (
	opCreateService opKind = iota
	opUpdateService
	opDeleteService
	opCreateDestination
	opUpdateDestination
	opDeleteDestination
	opZeroService
	opZero
	opFlush
	opSetTimeouts
)

// op is one change, as a single call or a Batch entry holds it.
type op struct {
	kind     opKind
	svc      Service
	dest     Destination
	timeouts Timeouts
}

func (o op) name() string {
	switch o.kind {
	case opCreateService:
		return "create service"
	case opUpdateService:
		return "update service"
	case opDeleteService:
		return "delete service"
	case opCreateDestination:
		return "create destination"
	case opUpdateDestination:
		return "update destination"
	case opDeleteDestination:
		return "delete destination"
	case opZeroService:
		return "zero service"
	case opZero:
		return "zero all"
	case opFlush:
		return "flush"
	}
	return "set timeouts"
}

func (o op) command() uint8 {
	switch o.kind {
	case opCreateService:
		return cmdNewService
	case opUpdateService:
		return cmdSetService
	case opDeleteService:
		return cmdDelService
	case opCreateDestination:
		return cmdNewDest
	case opUpdateDestination:
		return cmdSetDest
	case opDeleteDestination:
		return cmdDelDest
	case opZeroService, opZero:
		return cmdZero
	case opFlush:
		return cmdFlush
	}
	return cmdSetConfig
}

func (o op) hasService() bool {
	return o.kind <= opZeroService
}

func (o op) hasDestination() bool {
	return o.kind >= opCreateDestination && o.kind <= opDeleteDestination
}

// object names what the op acts on, for errors.
func (o op) object() string {
	switch {
	case o.hasDestination():
		return o.svc.String() + " -> " + o.dest.String()
	case o.hasService():
		return o.svc.String()
	}
	return ""
}

func (o op) validate() error {
	switch o.kind {
	case opCreateService, opUpdateService:
		return o.svc.validate()
	case opDeleteService, opZeroService:
		return o.svc.validateKey()
	case opCreateDestination, opUpdateDestination:
		if err := o.svc.validateKey(); err != nil {
			return err
		}
		return o.dest.validate()
	case opDeleteDestination:
		if err := o.svc.validateKey(); err != nil {
			return err
		}
		return o.dest.validateKey()
	case opSetTimeouts:
		return o.timeouts.validate()
	}
	return nil
}

// encode writes the op's request attributes.
func (o op) encode(w *nl.Writer) {
	if o.hasService() {
		o.encodeService(w)
	}
	o.encodeRest(w)
}

// encodeService writes the service attribute: the whole service to create
// or update one, its key otherwise.
func (o op) encodeService(w *nl.Writer) {
	full := o.kind == opCreateService || o.kind == opUpdateService
	n := w.Begin(cmdAttrService | nl.Nested)
	o.svc.encode(w, full)
	w.End(n)
}

// encodeRest writes the attributes after the service's.
func (o op) encodeRest(w *nl.Writer) {
	if o.hasDestination() {
		full := o.kind != opDeleteDestination
		n := w.Begin(cmdAttrDest | nl.Nested)
		o.dest.encode(w, full)
		w.End(n)
	}
	if o.kind == opSetTimeouts {
		o.timeouts.encode(w)
	}
}

// sentinel maps the kernel's errno for this op to a sentinel, following
// ip_vs_genl_set_cmd and the functions it calls in ip_vs_ctl.c.
func (o op) sentinel(errno unix.Errno) error {
	switch {
	case errno == unix.ESRCH && o.hasService():
		return ErrServiceNotExist
	case errno == unix.EEXIST && o.kind == opCreateService:
		return ErrServiceExist
	case errno == unix.EEXIST && o.kind == opCreateDestination:
		return ErrDestinationExist
	case errno == unix.ENOENT && (o.kind == opUpdateDestination || o.kind == opDeleteDestination):
		return ErrDestinationNotExist
	case errno == unix.ENOENT && (o.kind == opCreateService || o.kind == opUpdateService):
		return ErrSchedulerNotSupported
	}
	return nil
}

// opError turns a request's failure into the op's error.
func (o op) opError(index int, err error) *OpError {
	oe := &OpError{Op: o.name(), Object: o.object(), Index: index}
	oe.Message, oe.Err = nl.ErrorDetail(err)
	if errno, ok := oe.Err.(unix.Errno); ok {
		oe.sentinel = o.sentinel(errno)
	}
	return oe
}
