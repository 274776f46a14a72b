package watcher

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// The bounds of what a Service's annotations leave in the model: a
// tenant may write 256 KiB of annotations, and a bad value is kept with
// each of the Service's ports, hashed and compared at every sync and
// reported. So a value is kept cut to maxBadValue bytes, and of the words
// of a flags list that are no flag, the first maxBadWords distinct ones.
const (
	maxBadValue = 64
	maxBadWords = 3
)

// readTuning reads a Service's annotations. A bad value never leaves the
// Service out: it is left at its default and reported on the Service by
// the dataplane. Whether the scheduler exists is the dataplane's to say,
// but a name longer than the kernel's is refused here.
func readTuning(annotations map[string]string) tuning {
	var t tuning
	if name, value, ok := annotation(annotations, AnnotationScheduler, AnnotationKubeRouterScheduler); ok {
		t.scheduler = t.readScheduler(name, value)
	}
	if name, value, ok := annotation(annotations, AnnotationSchedulerFlags, AnnotationKubeRouterFlags); ok {
		t.flags = t.readFlags(name, value)
	}
	if value, ok := annotations[AnnotationDrainTimeout]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(value))
		switch {
		case err != nil:
			t.addBad(AnnotationDrainTimeout, value, "not a duration (such as 30s or 2h); the node's drain bound is used")
		case d <= 0:
			t.addBad(AnnotationDrainTimeout, value, "must be positive; the node's drain bound is used")
		case d > MaxDrainTimeout:
			t.addBad(AnnotationDrainTimeout, value, "above the ceiling of "+MaxDrainTimeout.String()+", which is used")
			t.drain = MaxDrainTimeout
		default:
			t.drain = d
		}
	}
	return t
}

// addBad records a value that could not be read, cut to maxBadValue.
func (t *tuning) addBad(annotation, value, reason string) {
	t.bad = append(t.bad, model.BadSetting{Field: annotation, Value: shorten(value, maxBadValue), Reason: reason})
}

// readScheduler returns the scheduler an annotation names, or "" for the
// node's when the name is empty or longer than any the kernel has.
func (t *tuning) readScheduler(annotation, value string) string {
	switch {
	case value == "":
		t.addBad(annotation, "", "empty; the node's scheduler is used")
	case len(value) > model.MaxSchedulerName:
		t.addBad(annotation, value, fmt.Sprintf("longer than the kernel's %d bytes; the node's scheduler is used", model.MaxSchedulerName))
		return ""
	}
	return value
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

// readFlags parses a comma-separated list of scheduler flags; the others
// apply, and the words that are no flag are reported together, the first
// maxBadWords distinct ones named.
func (t *tuning) readFlags(annotation, value string) model.SchedulerFlags {
	var flags model.SchedulerFlags
	var unknown []string
	more := 0
	for word := range strings.SplitSeq(value, ",") {
		word = strings.TrimSpace(word)
		if word == "" {
			continue
		}
		f, ok := model.ParseSchedulerFlag(word)
		switch {
		case ok:
			flags |= f
		case slices.Contains(unknown, shorten(word, maxBadValue)):
		case len(unknown) < maxBadWords:
			unknown = append(unknown, shorten(word, maxBadValue))
		default:
			more++
		}
	}
	if len(unknown) > 0 {
		reason := "not a scheduler flag (want sh-fallback, sh-port, mh-fallback, mh-port, flag-1, flag-2 or flag-3)"
		if more > 0 {
			reason += fmt.Sprintf("; and %d more words that are not", more)
		}
		t.bad = append(t.bad, model.BadSetting{Field: annotation, Value: strings.Join(unknown, ","), Reason: reason})
	}
	return flags
}

// shorten cuts s to at most n bytes, at a character boundary, marking the
// cut with "...".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
