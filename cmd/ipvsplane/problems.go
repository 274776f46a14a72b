package main

import (
	"errors"

	"github.com/ipvsplane/ipvsplane/dataplane"
	v1 "k8s.io/api/core/v1"
)

// Reasons and action of the Events on Services a sync cannot program as
// asked.
const (
	reasonConflict     = "VirtualServerConflict"
	reasonInvalidField = "InvalidServiceField"
	actionSync         = "SyncProxyRules"
)

// problemEvents records on the Services concerned the problems a sync
// reports with its service ports: a virtual server two ports claim, and a
// field that leaves a port out. Every sync reports every problem that
// persists, so that Events would repeat at each sync; a problem is
// recorded when it first appears, and again only if it went away and came
// back.
type problemEvents struct {
	// conflicts and fields are the problems the last sync reported.
	conflicts map[dataplane.ConflictError]bool
	fields    map[dataplane.FieldError]bool
}

// report records with events the problems among errs that the last sync
// did not report, and forgets those that went away.
func (p *problemEvents) report(events eventRecorder, errs []error) {
	conflicts := map[dataplane.ConflictError]bool{}
	fields := map[dataplane.FieldError]bool{}
	for _, err := range errs {
		var ce *dataplane.ConflictError
		var fe *dataplane.FieldError
		switch {
		case errors.As(err, &ce):
			if !p.conflicts[*ce] && !conflicts[*ce] {
				conflict(events, ce)
			}
			conflicts[*ce] = true
		case errors.As(err, &fe) && fe.Service.Name != "":
			if !p.fields[*fe] && !fields[*fe] {
				field(events, fe)
			}
			fields[*fe] = true
		}
	}
	p.conflicts, p.fields = conflicts, fields
}

// conflict records a lost claim on both Services: the one that does not
// get the virtual server, and the one that keeps it, whose operator may be
// the one to change.
func conflict(events eventRecorder, e *dataplane.ConflictError) {
	events.Eventf(serviceRef(e.Service.Namespace, e.Service.Name), v1.EventTypeWarning, reasonConflict, actionSync,
		"virtual server %s of service port %s is not programmed: service port %s claims it first; the rest of %s is programmed",
		e.Virtual, e.Service, e.Owner, e.Service)
	if e.Owner.Namespace == e.Service.Namespace && e.Owner.Name == e.Service.Name {
		return
	}
	events.Eventf(serviceRef(e.Owner.Namespace, e.Owner.Name), v1.EventTypeWarning, reasonConflict, actionSync,
		"virtual server %s of service port %s is also claimed by service port %s, which does not get it",
		e.Virtual, e.Owner, e.Service)
}

// field records on its Service a service port left out for a bad field.
func field(events eventRecorder, e *dataplane.FieldError) {
	events.Eventf(serviceRef(e.Service.Namespace, e.Service.Name), v1.EventTypeWarning, reasonInvalidField, actionSync,
		"service port %s is not programmed: field %s: %s", e.Service, e.Field, e.Reason)
}
