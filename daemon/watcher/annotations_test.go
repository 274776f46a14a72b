package watcher

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
)

func TestReadTuning(t *testing.T) {
	const (
		ours, ourFlags = AnnotationScheduler, AnnotationSchedulerFlags
		kr, krFlags    = AnnotationKubeRouterScheduler, AnnotationKubeRouterFlags
	)
	tests := []struct {
		name        string
		annotations map[string]string
		want        tuning
	}{
		{"none", nil, tuning{}},
		{"ours", map[string]string{ours: "sh", ourFlags: "sh-fallback, sh-port"},
			tuning{scheduler: "sh", flags: model.SHFallback | model.SHPort}},
		{"kube-router's", map[string]string{kr: "mh", krFlags: "flag-1,flag-2"},
			tuning{scheduler: "mh", flags: model.SchedFlag1 | model.SchedFlag2}},
		{"kube-router's flag-3", map[string]string{kr: "rr", krFlags: "flag-3"},
			tuning{scheduler: "rr", flags: model.SchedFlag3}},
		{"ours win", map[string]string{ours: "lc", kr: "dh", ourFlags: "mh-port", krFlags: "flag-1"},
			tuning{scheduler: "lc", flags: model.MHPort}},
		{"each setting on its own", map[string]string{ours: "mh", krFlags: "flag-2"},
			tuning{scheduler: "mh", flags: model.SchedFlag2}},
		// Whether the scheduler exists is the dataplane's to say.
		{"unknown scheduler passed on", map[string]string{ours: " fastest "}, tuning{scheduler: "fastest"}},
		{"empty scheduler", map[string]string{ours: ""},
			tuning{bad: []model.BadSetting{{Field: ours, Reason: "empty; the node's scheduler is used"}}}},
		{"bad flag", map[string]string{ours: "sh", ourFlags: "sh-port,sticky,,"},
			tuning{scheduler: "sh", flags: model.SHPort, bad: []model.BadSetting{{Field: ourFlags, Value: "sticky",
				Reason: "not a scheduler flag (want sh-fallback, sh-port, mh-fallback, mh-port, flag-1, flag-2 or flag-3)"}}}},
		{"scheduler name too long", map[string]string{ours: "weighted-round-robin"},
			tuning{bad: []model.BadSetting{{Field: ours, Value: "weighted-round-robin",
				Reason: "longer than the kernel's 15 bytes; the node's scheduler is used"}}}},
		{"bad flags named once each, three at most", map[string]string{ourFlags: "a,b,a,sh-port,b,c,d,e"},
			tuning{flags: model.SHPort, bad: []model.BadSetting{{Field: ourFlags, Value: "a,b,c",
				Reason: "not a scheduler flag (want sh-fallback, sh-port, mh-fallback, mh-port, flag-1, flag-2 or flag-3); and 2 more words that are not"}}}},
		{"drain", map[string]string{AnnotationDrainTimeout: "90s"}, tuning{drain: 90 * time.Second}},
		{"bad drain", map[string]string{AnnotationDrainTimeout: "soon"},
			tuning{bad: []model.BadSetting{{Field: AnnotationDrainTimeout, Value: "soon",
				Reason: "not a duration (such as 30s or 2h); the node's drain bound is used"}}}},
		{"drain at the ceiling", map[string]string{AnnotationDrainTimeout: "24h"}, tuning{drain: MaxDrainTimeout}},
		{"drain past the ceiling", map[string]string{AnnotationDrainTimeout: "10000h"},
			tuning{drain: MaxDrainTimeout, bad: []model.BadSetting{{Field: AnnotationDrainTimeout, Value: "10000h",
				Reason: "above the ceiling of 24h0m0s, which is used"}}}},
		{"negative drain", map[string]string{AnnotationDrainTimeout: "-1m"},
			tuning{bad: []model.BadSetting{{Field: AnnotationDrainTimeout, Value: "-1m",
				Reason: "must be positive; the node's drain bound is used"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, readTuning(tt.annotations), cmp.AllowUnexported(tuning{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every port of an annotated Service carries its tuning, and a bad value
// leaves no port out.
func TestServiceAnnotationsReachEveryPort(t *testing.T) {
	svc := service(func(s *v1.Service) {
		s.Annotations = map[string]string{AnnotationScheduler: "mh", AnnotationSchedulerFlags: "mh-port,mh-fallback", AnnotationDrainTimeout: "never"}
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	})
	ports, err := convertService(svc)
	if err != nil || len(ports) != 2 {
		t.Fatalf("ports %v, error %v", ports, err)
	}
	for _, p := range ports {
		if p.Scheduler != "mh" || p.SchedulerFlags != model.MHPort|model.MHFallback || p.DrainTimeout != 0 ||
			len(p.BadSettings) != 1 || p.BadSettings[0].Field != AnnotationDrainTimeout {
			t.Errorf("port %s: scheduler %q, flags %s, drain %v, bad %v", p.Name, p.Scheduler, p.SchedulerFlags, p.DrainTimeout, p.BadSettings)
		}
	}
}

// However large a tenant's annotations, what they leave in the model is
// a few short values: one per annotation, each cut to maxBadValue bytes.
func TestReadTuningBounded(t *testing.T) {
	var flags strings.Builder
	for i := 0; flags.Len() < 250<<10; i++ {
		fmt.Fprintf(&flags, "%s%d,", strings.Repeat("x", i%100), i)
	}
	tune := readTuning(map[string]string{
		AnnotationScheduler:      strings.Repeat("s", 100<<10),
		AnnotationSchedulerFlags: flags.String(),
		AnnotationDrainTimeout:   strings.Repeat("é", 1000),
	})
	if tune.scheduler != "" || len(tune.bad) != 3 {
		t.Fatalf("scheduler %.20q, %d bad settings, want the node's scheduler and 3", tune.scheduler, len(tune.bad))
	}
	for _, b := range tune.bad {
		if len(b.Value) > maxBadWords*(maxBadValue+1) || !utf8.ValidString(b.Value) {
			t.Errorf("%s: a value of %d bytes: %.80q", b.Field, len(b.Value), b.Value)
		}
	}
}
