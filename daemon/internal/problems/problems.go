// Package problems records as Kubernetes Events what a sync or a read
// cannot program as asked: on the Services whose ports a sync leaves out
// or programs otherwise (a conflict, a bad field, a scheduler fallback, an
// ignored setting), once while each lasts, and on the objects read with a
// bad entry or skipped.
package problems

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
// back. The new problems of one sync make one Event per Service and
// reason, shared by the nodes (events.Recorder.Shared) but for a
// scheduler this node's kernel lacks. The zero Events is ready for the
// first sync.
type Events struct {
	// conflicts, fields, schedulers and settings are the problems the
	// last sync reported.
	conflicts  map[plan.ConflictError]bool
	fields     map[model.FieldError]bool
	schedulers map[schedulerProblem]bool
	settings   map[model.SettingError]bool
	// last are the problems among the last sync's errors, in order. The
	// dataplane reports a port's problems with the same values until the
	// port changes, so a sync whose problems are these is told apart
	// without hashing them all, and most syncs change no problem.
	last, scratch []error
}

// schedulerProblem is a model.SchedulerError without its error value,
// which is not comparable across syncs.
type schedulerProblem struct {
	service             model.ServicePortName
	scheduler, fallback string
	// unknown and notAllowed say what the scheduler is: the Service's
	// problem; neither is the node's (its kernel lacks it).
	unknown, notAllowed bool
}

// Report records with rec the problems among errs that the last sync
// did not report, and forgets those that went away. It returns the errors
// to log: those new problems, and every other error, which is this sync's
// own (a failed operation, the node's settings). A problem that persists
// is thus logged, as it is recorded, once while it lasts.
func (p *Events) Report(rec events.Recorder, errs []error) []error {
	problems, others := p.scratch[:0], []error(nil)
	for _, err := range errs {
		if isProblem(err) {
			problems = append(problems, err)
		} else {
			others = append(others, err)
		}
	}
	if slices.EqualFunc(problems, p.last, sameProblem) && p.conflicts != nil {
		p.scratch = problems
		return others
	}
	p.last, p.scratch = problems, p.last
	return p.compare(rec, errs)
}

// isProblem reports whether err is one of the problems Report records.
func isProblem(err error) bool {
	switch e := err.(type) {
	case *plan.ConflictError, *model.SchedulerError, *model.SettingError:
		return true
	case *model.FieldError:
		return e.Service.Name != ""
	}
	var fe *model.FieldError
	return errors.As(err, new(*plan.ConflictError)) || errors.As(err, new(*model.SchedulerError)) ||
		errors.As(err, new(*model.SettingError)) || (errors.As(err, &fe) && fe.Service.Name != "")
}

// sameProblem reports whether two problems are the same value: the same
// error, or conflicts alike (the dataplane makes them anew at each sync).
func sameProblem(a, b error) bool {
	if a == b {
		return true
	}
	ca, ok := a.(*plan.ConflictError)
	cb, ok2 := b.(*plan.ConflictError)
	return ok && ok2 && *ca == *cb
}

// compare records the problems among errs that the last sync did not
// report and forgets those that went away; see Report.
func (p *Events) compare(rec events.Recorder, errs []error) []error {
	next := Events{last: p.last, scratch: p.scratch, conflicts: map[plan.ConflictError]bool{}, fields: map[model.FieldError]bool{},
		schedulers: map[schedulerProblem]bool{}, settings: map[model.SettingError]bool{}}
	var fresh []error
	var c collector
	for _, err := range errs {
		var ce *plan.ConflictError
		var fe *model.FieldError
		var se *model.SchedulerError
		var ie *model.SettingError
		isNew := true
		switch {
		case errors.As(err, &ce):
			isNew = once(p.conflicts, next.conflicts, *ce, func() { c.conflict(ce) })
		case errors.As(err, &fe) && fe.Service.Name != "":
			isNew = once(p.fields, next.fields, *fe, func() { c.field(fe) })
		case errors.As(err, &se):
			key := schedulerProblem{se.Service, se.Scheduler, se.Fallback, errors.Is(se, model.ErrUnknownScheduler), errors.Is(se, model.ErrSchedulerNotAllowed)}
			isNew = once(p.schedulers, next.schedulers, key, func() { c.scheduler(se, key) })
		case errors.As(err, &ie):
			isNew = once(p.settings, next.settings, *ie, func() { c.setting(ie) })
		}
		if isNew {
			fresh = append(fresh, err)
		}
	}
	if rec != nil {
		c.record(rec, actionSync)
	}
	*p = next
	return fresh
}

// once records a problem k that the last sync (last) did not report and
// this one (now) has not yet, notes it in now, and reports whether it was
// new.
func once[K comparable](last, now map[K]bool, k K, record func()) bool {
	isNew := !last[k] && !now[k]
	if isNew {
		record()
	}
	now[k] = true
	return isNew
}

// collector gathers the notes of the Events of one sync or one object
// version, one Event per object and reason, in the order they come.
type collector struct {
	order []eventKey
	notes map[eventKey][]string
}

// eventKey names one Event: its object and reason, and whether it is
// this node's own.
type eventKey struct {
	ref    v1.ObjectReference
	reason string
	node   bool
}

// add notes a problem on the object ref.
func (c *collector) add(ref v1.ObjectReference, reason, note string, node bool) {
	k := eventKey{ref, reason, node}
	if c.notes == nil {
		c.notes = map[eventKey][]string{}
	}
	if _, ok := c.notes[k]; !ok {
		c.order = append(c.order, k)
	}
	c.notes[k] = append(c.notes[k], note)
}

// record records one Warning per object and reason, its notes together:
// shared by the nodes, but for this node's own.
func (c *collector) record(rec events.Recorder, action string) {
	for _, k := range c.order {
		note := summary(c.notes[k])
		if k.node {
			rec.Eventf(k.ref, v1.EventTypeWarning, k.reason, action, "%s", note)
			continue
		}
		rec.Shared(k.ref.Kind+"/"+k.ref.Namespace+"/"+k.ref.Name+"/"+k.reason, k.ref, v1.EventTypeWarning, k.reason, action, note)
	}
}

// maxNote is the API server's limit on an Event's note.
const maxNote = 1024

// summary joins an Event's notes, as many as fit an Event's note, and
// says how many more there are.
func summary(notes []string) string {
	var b strings.Builder
	for i, n := range notes {
		rest := fmt.Sprintf("; and %d more", len(notes)-i)
		if i > 0 && b.Len()+2+len(n)+len(rest) > maxNote {
			b.WriteString(rest)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n)
	}
	return b.String()
}

// conflict notes a lost claim on both Services: the one that does not
// get the virtual server, and the one that keeps it, whose operator may be
// the one to change.
func (c *collector) conflict(e *plan.ConflictError) {
	c.add(events.ServiceRef(e.Service.Namespace, e.Service.Name), ReasonConflict, fmt.Sprintf(
		"virtual server %s of service port %s is not programmed: service port %s claims it first; the rest of %s is programmed",
		e.Virtual, e.Service, e.Owner, e.Service), false)
	if e.Owner.Namespace == e.Service.Namespace && e.Owner.Name == e.Service.Name {
		return
	}
	c.add(events.ServiceRef(e.Owner.Namespace, e.Owner.Name), ReasonConflict, fmt.Sprintf(
		"virtual server %s of service port %s is also claimed by service port %s, which does not get it",
		e.Virtual, e.Owner, e.Service), false)
}

// field notes on its Service a service port left out for a bad field.
func (c *collector) field(e *model.FieldError) {
	c.add(events.ServiceRef(e.Service.Namespace, e.Service.Name), ReasonInvalidField,
		fmt.Sprintf("service port %s is not programmed: field %s: %s", e.Service, e.Field, e.Reason), false)
}

// scheduler notes on its Service a service port programmed with the
// node's scheduler instead of the one it names. A scheduler the kernel
// lacks is this node's problem, not the Service's: its Event is the
// node's own.
func (c *collector) scheduler(e *model.SchedulerError, key schedulerProblem) {
	ref := events.ServiceRef(e.Service.Namespace, e.Service.Name)
	switch {
	case key.unknown:
		c.add(ref, ReasonUnknownScheduler, fmt.Sprintf(
			"service port %s: annotation %s (or %s) names %q, which is not an IPVS scheduler (rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos); it is programmed with the node's scheduler %s",
			e.Service, watcher.AnnotationScheduler, watcher.AnnotationKubeRouterScheduler, e.Scheduler, e.Fallback), false)
		return
	case key.notAllowed:
		c.add(ref, ReasonUnknownScheduler, fmt.Sprintf(
			"service port %s: annotation %s (or %s) names %q, which is not among the schedulers the node allows (--allowed-schedulers); it is programmed with the node's scheduler %s",
			e.Service, watcher.AnnotationScheduler, watcher.AnnotationKubeRouterScheduler, e.Scheduler, e.Fallback), false)
		return
	}
	c.add(ref, ReasonMissingScheduler, fmt.Sprintf(
		"service port %s: the kernel lacks the IPVS scheduler %q that annotation %s (or %s) names (%v); it is programmed with the node's scheduler %s",
		e.Service, e.Scheduler, watcher.AnnotationScheduler, watcher.AnnotationKubeRouterScheduler, e.Err, e.Fallback), true)
}

// setting notes on its Service a setting its port is programmed
// without. The dataplane names scheduler flags by its model's field; the
// Event names the annotations they come from.
func (c *collector) setting(e *model.SettingError) {
	where := "annotation " + e.Field
	switch e.Field {
	case model.FieldSchedulerFlags:
		where = fmt.Sprintf("annotation %s (or %s)", watcher.AnnotationSchedulerFlags, watcher.AnnotationKubeRouterFlags)
	case model.FieldExternalIPs:
		where = "spec.externalIPs"
	case model.FieldLoadBalancerIPs:
		where = "status.loadBalancer.ingress"
	}
	c.add(events.ServiceRef(e.Service.Namespace, e.Service.Name), ReasonIgnoredSetting,
		fmt.Sprintf("service port %s: %s: %q is ignored: %s", e.Service, where, e.Value, e.Reason), false)
}

// RecordInvalid records on its object the problems err holds (an
// [*watcher.InvalidError], or several joined) with a Service, an
// EndpointSlice or a Node as it is read: an entry left out while the rest
// is programmed, or the object skipped. Each arrives once per version of
// the object; its problems make one Event per object and reason, shared
// by the nodes (events.Recorder.Shared) and so at most one per
// events.SharedWindow.
func RecordInvalid(rec events.Recorder, err error) {
	if rec == nil {
		return
	}
	var c collector
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
		c.add(ref, reason, fmt.Sprintf("field %s: %s; %s", ie.Field, ie.Reason, outcome), ie.Kind == "Node")
	}
	c.record(rec, actionRead)
}
