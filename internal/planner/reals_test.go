package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

func realAt(addr string, port uint16, weight int) RealServer {
	return RealServer{RealKey: RealKey{Addr: fixture.IP(addr), Port: port}, Weight: weight}
}

func TestRealsChanged(t *testing.T) {
	vk := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}
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
	vk := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}
	desired := NewKernelState()
	desired.Virtual[vk] = VirtualServer{VirtualKey: vk, Scheduler: "rr"}
	desired.Reals[vk] = Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.2", 80, 1)}
	pl := Diff(DiffInputs{Observed: NewKernelState(), Desired: desired, Scope: FullScope})
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

// A real server whose endpoint left is removed as kube-proxy's
// GracefulDeleteRS removes it: UDP and SCTP at once, with their flows;
// TCP at once when it holds no connection, active or inactive, else at
// weight 0 until its connections end or the drain times out.
func TestDiffRealsRemoval(t *testing.T) {
	now := time.Unix(1e9, 0)
	tcp := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}
	udp := VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 53, Protocol: inet.UDP}
	kept := realAt("10.0.0.1", 80, 1)
	gone := func(weight int, active, inactive uint32) RealServer {
		r := realAt("10.0.0.2", 80, weight)
		r.ActiveConns, r.InactiveConns = active, inactive
		return r
	}
	del := func(vk VirtualKey) Op { return DeleteReal{Virtual: vk, Real: gone(0, 0, 0).RealKey} }
	drain := UpdateReal{Virtual: tcp, Real: RealServer{RealKey: gone(0, 0, 0).RealKey}}
	since := func(ago time.Duration) Drain {
		return Drain{Since: map[VirtualKey]map[RealKey]time.Time{tcp: {gone(0, 0, 0).RealKey: now.Add(-ago)}}, Timeout: time.Minute, Now: now}
	}
	for _, tt := range []struct {
		name  string
		vk    VirtualKey
		have  RealServer
		drain Drain
		want  []Op
	}{
		{"tcp idle is deleted at once", tcp, gone(1, 0, 0), Drain{}, []Op{del(tcp)}},
		{"tcp with an active connection drains", tcp, gone(1, 1, 0), Drain{}, []Op{drain}},
		{"tcp with an inactive connection drains", tcp, gone(1, 0, 2), Drain{}, []Op{drain}},
		{"tcp draining waits for its connections", tcp, gone(0, 1, 0), since(time.Second), nil},
		{"tcp draining whose connections ended is deleted", tcp, gone(0, 0, 0), since(time.Second), []Op{del(tcp)}},
		{"tcp draining past its bound is deleted", tcp, gone(0, 1, 0), since(time.Minute), []Op{del(tcp)}},
		{"udp with connections is deleted at once", udp, gone(1, 3, 3), Drain{}, []Op{del(udp)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := appendRealsDiff(nil, tt.vk, NewReals([]RealServer{kept, tt.have}), Reals{kept}, tt.drain)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			observed, desired := NewKernelState(), NewKernelState()
			observed.Reals[tt.vk] = NewReals([]RealServer{kept, tt.have})
			desired.Reals[tt.vk] = Reals{kept}
			if LosesReals(observed, desired, tt.vk) {
				t.Errorf("LosesReals of a virtual server that goes away is true: it is deleted whole, its counts unread")
			}
			desired.Virtual[tt.vk] = VirtualServer{}
			if want := tt.vk.Protocol == inet.TCP && tt.have.Weight != 0; LosesReals(observed, desired, tt.vk) != want {
				t.Errorf("LosesReals is %v, want %v: the counts must be read first", !want, want)
			}
		})
	}
}
