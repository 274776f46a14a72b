package model

import "testing"

func TestSchedulerFlagsForScheduler(t *testing.T) {
	tests := []struct {
		sched           string
		flags           SchedulerFlags
		kernel, ignored SchedulerFlags
	}{
		{"sh", SHFallback | SHPort, SchedFlag1 | SchedFlag2, 0},
		{"mh", MHPort, SchedFlag2, 0},
		{"mh", SchedFlag1 | SchedFlag2, SchedFlag1 | SchedFlag2, 0},
		{"mh", SHPort | MHFallback, SchedFlag1, SHPort},
		{"sh", MHPort, 0, MHPort},
		{"rr", SHPort | SchedFlag1, 0, SHPort | SchedFlag1},
		{"rr", SchedFlag3, SchedFlag3, 0},
	}
	for _, tt := range tests {
		kernel, ignored := tt.flags.forScheduler(tt.sched)
		if kernel != tt.kernel || ignored != tt.ignored {
			t.Errorf("%s with %s: kernel %s, ignored %s; want %s, %s", tt.sched, tt.flags, kernel, ignored, tt.kernel, tt.ignored)
		}
	}
	for _, n := range schedulerFlagNames {
		if f, ok := ParseSchedulerFlag(n.name); !ok || f != n.flag || f.String() != n.name {
			t.Errorf("ParseSchedulerFlag(%q) = %s, %v", n.name, f, ok)
		}
	}
	if _, ok := ParseSchedulerFlag("sh_port"); ok {
		t.Error("ParseSchedulerFlag took sh_port")
	}
}
