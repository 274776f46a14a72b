package dataplane

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"golang.org/x/sys/unix"
)

// recordIPVS records the real servers of an AddReals that succeeded,
// reports each one that failed on its own, and plans its virtual server
// again.
func TestRecordIPVSPartialAddReals(t *testing.T) {
	realAt := func(addr string, port uint16, weight int) plan.RealServer {
		return plan.RealServer{RealKey: plan.RealKey{Addr: fixture.IP(addr), Port: port}, Weight: weight}
	}
	vk := plan.VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}
	other := plan.VirtualKey{Addr: fixture.IP("10.96.0.2"), Port: 80, Protocol: inet.TCP}
	add := plan.AddReals{Virtual: vk, Reals: plan.Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.2", 80, 1), realAt("10.0.0.3", 80, 1)}}
	ops := []plan.Op{
		plan.AddVirtual{Virtual: plan.VirtualServer{VirtualKey: vk, Scheduler: "rr"}},
		add,
		plan.AddReals{Virtual: other, Reals: plan.Reals{realAt("10.0.1.1", 80, 1)}},
		plan.UpdateReal{Virtual: vk, Real: realAt("10.0.0.9", 80, 0)},
	}
	reqs := []ipvsRequest{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {3, 0}}
	l := newLedger(time.Now)
	l.state = plan.NewKernelState()
	l.state.Reals[vk] = plan.Reals{realAt("10.0.0.9", 80, 1)}
	errs := l.recordIPVS(ops, reqs, map[int]error{2: unix.ENOMEM, 4: unix.EBUSY})

	if len(errs) != 2 {
		t.Fatalf("got %d errors, want 2: %v", len(errs), errs)
	}
	var oe *OpError
	if !errors.As(errs[0], &oe) || !errors.Is(errs[0], unix.ENOMEM) || oe.Op.String() != "ipvs add TCP 10.96.0.1:80 -> 10.0.0.2:80 weight 1" {
		t.Errorf("first error %v does not name the one failed real server", errs[0])
	}
	want := plan.Reals{realAt("10.0.0.1", 80, 1), realAt("10.0.0.3", 80, 1), realAt("10.0.0.9", 80, 0)}
	if got := l.state.Reals[vk]; !slices.Equal(got, want) {
		t.Errorf("programmed %v, want %v", got, want)
	}
	if _, ok := l.state.Reals[other]; ok {
		t.Errorf("a virtual server whose only addition failed has real servers %v", l.state.Reals[other])
	}
	if _, ok := l.state.Virtual[vk]; !ok {
		t.Error("the added virtual server is not recorded")
	}
	if !l.retry.Virtual[vk] || !l.retry.Virtual[other] {
		t.Errorf("virtual servers to plan again: %v", l.retry.Virtual)
	}
	if _, ok := l.draining[vk][plan.RealKey{Addr: fixture.IP("10.0.0.9"), Port: 80}]; !ok {
		t.Error("the real server set to weight 0 is not draining")
	}
}
