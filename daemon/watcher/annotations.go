package watcher

import (
	"strings"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// The annotations of a Service that tune its IPVS virtual servers.
// kube-router's names are read too, so that Services written for it keep
// their scheduler; where both name one setting, ipvsplane's wins.
const (
	// AnnotationScheduler names the IPVS scheduler (rr, wrr, lc, wlc,
	// lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh, twos).
	AnnotationScheduler = "ipvsplane.io/scheduler"
	// AnnotationSchedulerFlags lists scheduler flags, comma-separated:
	// sh-fallback, sh-port, mh-fallback, mh-port, flag-1, flag-2, flag-3.
	AnnotationSchedulerFlags = "ipvsplane.io/scheduler-flags"
	// AnnotationDrainTimeout bounds how long the Service's real servers
	// drain (a Go duration, such as 30s or 2h).
	AnnotationDrainTimeout = "ipvsplane.io/drain-timeout"
	// AnnotationKubeRouterScheduler is kube-router's name of
	// AnnotationScheduler.
	AnnotationKubeRouterScheduler = "kube-router.io/service.scheduler"
	// AnnotationKubeRouterFlags is kube-router's name of
	// AnnotationSchedulerFlags.
	AnnotationKubeRouterFlags = "kube-router.io/service.schedflags"
)

// MaxDrainTimeout is the longest drain AnnotationDrainTimeout may ask:
// a Service's own connections must not keep its gone endpoints' real
// servers on the node for as long as they last.
const MaxDrainTimeout = 24 * time.Hour

// tuning is what a Service's annotations ask of its virtual servers.
type tuning struct {
	scheduler string
	flags     model.SchedulerFlags
	drain     time.Duration
	// bad are the values that could not be read; the rest applies.
	bad []model.BadSetting
}

// readTuning reads a Service's annotations. A bad value never leaves the
// Service out: it is left at its default and reported on the Service by
// the dataplane. Whether the scheduler exists is the dataplane's to say.
func readTuning(annotations map[string]string) tuning {
	var t tuning
	if name, value, ok := annotation(annotations, AnnotationScheduler, AnnotationKubeRouterScheduler); ok {
		t.scheduler = value
		if value == "" {
			t.bad = append(t.bad, model.BadSetting{Field: name, Reason: "empty; the node's scheduler is used"})
		}
	}
	if name, value, ok := annotation(annotations, AnnotationSchedulerFlags, AnnotationKubeRouterFlags); ok {
		t.flags = t.readFlags(name, value)
	}
	if value, ok := annotations[AnnotationDrainTimeout]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(value))
		switch {
		case err != nil:
			t.bad = append(t.bad, model.BadSetting{Field: AnnotationDrainTimeout, Value: value, Reason: "not a duration (such as 30s or 2h); the node's drain bound is used"})
		case d <= 0:
			t.bad = append(t.bad, model.BadSetting{Field: AnnotationDrainTimeout, Value: value, Reason: "must be positive; the node's drain bound is used"})
		case d > MaxDrainTimeout:
			t.bad = append(t.bad, model.BadSetting{Field: AnnotationDrainTimeout, Value: value, Reason: "above the ceiling of " + MaxDrainTimeout.String() + ", which is used"})
			t.drain = MaxDrainTimeout
		default:
			t.drain = d
		}
	}
	return t
}

// annotation returns the first of names a Service has, with its value
// trimmed.
func annotation(annotations map[string]string, names ...string) (name, value string, ok bool) {
	for _, name := range names {
		if v, ok := annotations[name]; ok {
			return name, strings.TrimSpace(v), true
		}
	}
	return "", "", false
}

// readFlags parses a comma-separated list of scheduler flags; an unknown
// one is reported and the others apply.
func (t *tuning) readFlags(annotation, value string) model.SchedulerFlags {
	var flags model.SchedulerFlags
	for _, word := range strings.Split(value, ",") {
		word = strings.TrimSpace(word)
		if word == "" {
			continue
		}
		f, ok := model.ParseSchedulerFlag(word)
		if !ok {
			t.bad = append(t.bad, model.BadSetting{Field: annotation, Value: word,
				Reason: "not a scheduler flag (want sh-fallback, sh-port, mh-fallback, mh-port, flag-1, flag-2 or flag-3)"})
			continue
		}
		flags |= f
	}
	return flags
}
