// Package problems records as Kubernetes Events what a sync or a read
// cannot program as asked: on the Services whose ports a sync leaves out
// or programs otherwise (a conflict, a bad field, a scheduler fallback, an
// ignored setting), once while each lasts, and on the objects read with a
// bad entry or skipped.
package problems

import (
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	v1 "k8s.io/api/core/v1"
)

// The reasons (and action) of the Events on Services a sync cannot program as
// asked.
const (
	ReasonConflict         = "VirtualServerConflict"
	ReasonInvalidField     = "InvalidServiceField"
	ReasonUnknownScheduler = "UnknownScheduler"
	ReasonMissingScheduler = "SchedulerUnavailable"
	ReasonIgnoredSetting   = "IgnoredServiceSetting"
	actionSync             = "SyncProxyRules"
)

// The reasons (and action) of the Events on objects that cannot be read whole.
const (
	ReasonInvalidObject = "InvalidObject"
	ReasonInvalidEntry  = "InvalidEntryIgnored"
	actionRead          = "ReadObject"
)

// Events records on the Services concerned the problems a sync
// reports with its service ports: a virtual server two ports claim, a
// field that leaves a port out, a scheduler the port does not get, a
// setting it is programmed without. Every sync reports every problem that
// persists, so that Events would repeat at each sync; a problem is
// recorded when it first appears, and again only if it went away and came
// back. The zero Events is ready for the first sync.
type Events struct {
	// conflicts, fields, schedulers and settings are the problems the
	// last sync reported.
	conflicts  map[plan.ConflictError]bool
	fields     map[model.FieldError]bool
	schedulers map[schedulerProblem]bool
	settings   map[model.SettingError]bool
}

// schedulerProblem is a model.SchedulerError without its error value,
// which is not comparable across syncs.
type schedulerProblem struct {
	service             model.ServicePortName
	scheduler, fallback string
	unknown             bool
}

// Report records with rec the problems among errs that the last sync
// did not report, and forgets those that went away. It returns the errors
// to log: those new problems, and every other error, which is this sync's
// own (a failed operation, the node's settings). A problem that persists
// is thus logged, as it is recorded, once while it lasts.
func (p *Events) Report(rec events.Recorder, errs []error) []error {
	next := Events{conflicts: map[plan.ConflictError]bool{}, fields: map[model.FieldError]bool{},
		schedulers: map[schedulerProblem]bool{}, settings: map[model.SettingError]bool{}}
	var fresh []error
	for _, err := range errs {
		var ce *plan.ConflictError
		var fe *model.FieldError
		var se *model.SchedulerError
		var ie *model.SettingError
		isNew := true
		switch {
		case errors.As(err, &ce):
			isNew = once(p.conflicts, next.conflicts, *ce, rec, func() { conflict(rec, ce) })
		case errors.As(err, &fe) && fe.Service.Name != "":
			isNew = once(p.fields, next.fields, *fe, rec, func() { field(rec, fe) })
		case errors.As(err, &se):
			key := schedulerProblem{se.Service, se.Scheduler, se.Fallback, errors.Is(se, model.ErrUnknownScheduler)}
			isNew = once(p.schedulers, next.schedulers, key, rec, func() { scheduler(rec, se, key.unknown) })
		case errors.As(err, &ie):
			isNew = once(p.settings, next.settings, *ie, rec, func() { setting(rec, ie) })
		}
		if isNew {
			fresh = append(fresh, err)
		}
	}
	*p = next
	return fresh
}

// once records a problem k that the last sync (last) did not report and
// this one (now) has not yet, when there is a recorder, notes it in now,
// and reports whether it was new.
func once[K comparable](last, now map[K]bool, k K, rec events.Recorder, record func()) bool {
	isNew := !last[k] && !now[k]
	if isNew && rec != nil {
		record()
	}
	now[k] = true
	return isNew
}

// conflict records a lost claim on both Services: the one that does not
// get the virtual server, and the one that keeps it, whose operator may be
// the one to change.
func conflict(rec events.Recorder, e *plan.ConflictError) {
	rec.Eventf(events.ServiceRef(e.Service.Namespace, e.Service.Name), v1.EventTypeWarning, ReasonConflict, actionSync,
		"virtual server %s of service port %s is not programmed: service port %s claims it first; the rest of %s is programmed",
		e.Virtual, e.Service, e.Owner, e.Service)
	if e.Owner.Namespace == e.Service.Namespace && e.Owner.Name == e.Service.Name {
		return
	}
	rec.Eventf(events.ServiceRef(e.Owner.Namespace, e.Owner.Name), v1.EventTypeWarning, ReasonConflict, actionSync,
		"virtual server %s of service port %s is also claimed by service port %s, which does not get it",
		e.Virtual, e.Owner, e.Service)
}

// field records on its Service a service port left out for a bad field.
func field(rec events.Recorder, e *model.FieldError) {
	rec.Eventf(events.ServiceRef(e.Service.Namespace, e.Service.Name), v1.EventTypeWarning, ReasonInvalidField, actionSync,
		"service port %s is not programmed: field %s: %s", e.Service, e.Field, e.Reason)
}

// scheduler records on its Service a service port programmed with the
// node's scheduler instead of the one it names.
func scheduler(rec events.Recorder, e *model.SchedulerError, unknown bool) {
	ref := events.ServiceRef(e.Service.Namespace, e.Service.Name)
	if unknown {
		rec.Eventf(ref, v1.EventTypeWarning, ReasonUnknownScheduler, actionSync,
			"service port %s: annotation %s (or %s) names %q, which is not an IPVS scheduler (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos); it is programmed with the node's scheduler %s",
			e.Service, watcher.AnnotationScheduler, watcher.AnnotationKubeRouterScheduler, e.Scheduler, e.Fallback)
		return
	}
	rec.Eventf(ref, v1.EventTypeWarning, ReasonMissingScheduler, actionSync,
		"service port %s: the kernel lacks the IPVS scheduler %q that annotation %s (or %s) names (%v); it is programmed with the node's scheduler %s",
		e.Service, e.Scheduler, watcher.AnnotationScheduler, watcher.AnnotationKubeRouterScheduler, e.Err, e.Fallback)
}

// setting records on its Service a setting its port is programmed
// without. The dataplane names scheduler flags by its model's field; the
// Event names the annotations they come from.
func setting(rec events.Recorder, e *model.SettingError) {
	where := "annotation " + e.Field
	if e.Field == model.FieldSchedulerFlags {
		where = fmt.Sprintf("annotation %s (or %s)", watcher.AnnotationSchedulerFlags, watcher.AnnotationKubeRouterFlags)
	}
	rec.Eventf(events.ServiceRef(e.Service.Namespace, e.Service.Name), v1.EventTypeWarning, ReasonIgnoredSetting, actionSync,
		"service port %s: %s: %q is ignored: %s", e.Service, where, e.Value, e.Reason)
}

// RecordInvalid records on its object each problem err holds (an
// [*watcher.InvalidError], or several joined) with a Service, an
// EndpointSlice or a Node as it is read: an entry left out while the rest
// is programmed, or the object skipped. Each arrives once per version of
// the object.
func RecordInvalid(rec events.Recorder, err error) {
	if rec == nil {
		return
	}
	for _, e := range watcher.Unjoin(err) {
		ie, ok := errors.AsType[*watcher.InvalidError](e)
		if !ok || ie.Name == "" {
			continue
		}
		var ref v1.ObjectReference
		switch ie.Kind {
		case "Service":
			ref = events.ServiceRef(ie.Namespace, ie.Name)
		case "EndpointSlice":
			ref = v1.ObjectReference{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice", Namespace: ie.Namespace, Name: ie.Name}
		case "Node":
			ref = events.NodeRef(ie.Name)
		default:
			continue
		}
		reason, outcome := ReasonInvalidObject, "the "+ie.Kind+" is not programmed"
		switch {
		case ie.Entry:
			reason, outcome = ReasonInvalidEntry, "the rest of the "+ie.Kind+" is used"
		case ie.Kind == "Node":
			outcome = "the node keeps the settings it had"
		}
		rec.Eventf(ref, v1.EventTypeWarning, reason, actionRead, "field %s: %s; %s", ie.Field, ie.Reason, outcome)
	}
}
