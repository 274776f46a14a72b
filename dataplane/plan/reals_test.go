package plan

import (
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

func realAt(addr string, port uint16, weight int) RealServer {
	return RealServer{RealKey: RealKey{Addr: fixture.IP(addr), Port: port}, Weight: weight}
}

func TestRealsChanged(t *testing.T) {
	vk := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: model.TCP}
	base := Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.3", 80, 1), realAt("10.0.0.5", 80, 1)}
	tests := []struct {
		name string
		ops  []Op
		want Reals
	}{
		{"add between and after", []Op{AddReals{Virtual: vk, Reals: Reals{realAt("10.0.0.2", 80, 1), realAt("10.0.0.9", 80, 1)}}},
			Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.2", 80, 1), realAt("10.0.0.3", 80, 1), realAt("10.0.0.5", 80, 1), realAt("10.0.0.9", 80, 1)}},
		{"add one already there replaces it", []Op{AddReals{Virtual: vk, Reals: Reals{realAt("10.0.0.3", 80, 0)}}},
			Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.3", 80, 0), realAt("10.0.0.5", 80, 1)}},
		{"reweight and delete in one pass", []Op{
			UpdateReal{Virtual: vk, Real: realAt("10.0.0.1", 80, 0)},
			DeleteReal{Virtual: vk, Real: RealKey{Addr: fixture.IP("10.0.0.5"), Port: 80}},
			UpdateReal{Virtual: vk, Real: realAt("10.0.0.7", 80, 1)},
		}, Reals{realAt("10.0.0.1", 80, 0), realAt("10.0.0.3", 80, 1)}},
		{"delete what is not there", []Op{DeleteReal{Virtual: vk, Real: RealKey{Addr: fixture.IP("10.0.0.2"), Port: 80}}}, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(base)
			got := base.changed(tt.ops...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if !slices.Equal(base, before) {
				t.Errorf("changed modified its receiver: %v, was %v", base, before)
			}
		})
	}
}

// A first sync adds a virtual server's whole desired list, and the
// programmed state then holds that same list, not a copy.
func TestFirstSyncSharesDesiredReals(t *testing.T) {
	vk := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: model.TCP}
	desired := NewKernelState()
	desired.Virtual[vk] = VirtualServer{VirtualKey: vk, Scheduler: "rr"}
	desired.Reals[vk] = Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.2", 80, 1)}
	pl := Diff(NewKernelState(), desired, nil, FullScope, Drain{})
	var add AddReals
	for op := range pl.All() {
		if o, ok := op.(AddReals); ok {
			add = o
		}
	}
	if len(add.Reals) != 2 || &add.Reals[0] != &desired.Reals[vk][0] {
		t.Fatalf("the plan's AddReals %v is not the desired list %v", add, desired.Reals[vk])
	}
	programmed := NewKernelState()
	for op := range pl.All() {
		programmed.Record(op)
	}
	if &programmed.Reals[vk][0] != &desired.Reals[vk][0] {
		t.Error("the programmed state copied the desired list")
	}
	// A later change replaces the programmed list and leaves the
	// desired one as it was.
	programmed.Record(UpdateReal{Virtual: vk, Real: realAt("10.0.0.1", 80, 0)})
	if desired.Reals[vk][0].Weight != 1 || programmed.Reals[vk][0].Weight != 0 {
		t.Errorf("desired %v, programmed %v after a reweight", desired.Reals[vk], programmed.Reals[vk])
	}
}
