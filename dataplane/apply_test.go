package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"golang.org/x/sys/unix"
)

// A sync whose rules fail creates no new virtual server and binds no
// address that would draw traffic without its masquerade and firewall
// rules: it reports the failure and what it held back, plans them all
// again, and leaves what is programmed alone. (The dataplane has no IPVS
// or dummy device here: an operation that was not held back would reach
// the kernel and fail the test.)
func TestApplyHoldsBackAfterRulesFail(t *testing.T) {
	vk := plan.VirtualKey{Addr: fixture.IP("10.96.0.10"), Port: 80, Protocol: inet.TCP}
	existing := plan.VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 443, Protocol: inet.TCP}
	real := plan.RealServer{RealKey: plan.RealKey{Addr: fixture.IP("10.244.0.5"), Port: 8080}, Weight: 1}
	pl := plan.New(
		plan.ReplaceRules{Rules: "table ip ipvsplane {}"},
		plan.AddVirtual{Virtual: plan.VirtualServer{VirtualKey: vk, Scheduler: "rr"}},
		plan.AddReals{Virtual: vk, Reals: plan.Reals{real}},
		plan.Bind{Addr: vk.Addr},
	)
	l := newLedger(time.Now)
	l.state = plan.NewKernelState()
	a := &applier{ledger: l, cfg: &Config{Now: time.Now}}
	l.state.Virtual[existing] = plan.VirtualServer{VirtualKey: existing, Scheduler: "rr"}
	l.state.Addresses[existing.Addr] = true
	ctx := fault.With(context.Background(), func(pkg, _ string) error {
		if pkg == "nftables" {
			return unix.EPERM
		}
		return nil
	})

	errs := a.apply(ctx, pl, target{kernel: plan.NewKernelState()}, &FlowCleanup{})

	var oe *OpError
	if len(errs) == 0 || !errors.As(errs[0], &oe) || !errors.Is(errs[0], unix.EPERM) {
		t.Fatalf("errors %v: want the rules' failure first", errs)
	}
	if _, ok := oe.Op.(plan.ReplaceRules); !ok {
		t.Errorf("failed operation %v, want the rules", oe.Op)
	}
	var held *HeldBackError
	if len(errs) != 2 || !errors.As(errs[1], &held) || held.Virtual != 1 || held.Addresses != 1 {
		t.Errorf("errors %v: want one virtual server and one address held back", errs)
	}
	if !rulesFailed(errs) {
		t.Error("rulesFailed is false after the rules failed")
	}
	if !l.retry.All || !l.retry.Virtual[vk] || !l.retry.Addresses[vk.Addr] {
		t.Errorf("planned again: %+v; want everything, the virtual server and its address", l.retry)
	}
	if l.isProgrammed(vk) || l.state.Addresses[vk.Addr] {
		t.Error("the held-back virtual server or address is recorded as programmed")
	}
	if !l.isProgrammed(existing) || !l.state.Addresses[existing.Addr] {
		t.Error("what was programmed before is gone")
	}
}

// Only the failure of what prepares the traffic (sets, entries, rules)
// makes the node unprogrammed; a virtual server that failed does not.
func TestRulesFailed(t *testing.T) {
	vk := plan.VirtualKey{Addr: fixture.IP("10.96.0.10"), Port: 80, Protocol: inet.TCP}
	for _, tt := range []struct {
		op   plan.Op
		want bool
	}{
		{plan.CreateSet{Spec: planner.SetSpec{Name: "KUBE-CLUSTER-IP"}}, true},
		{plan.AddEntries{Set: "KUBE-CLUSTER-IP"}, true},
		{plan.ReplaceRules{}, true},
		{plan.AddVirtual{Virtual: plan.VirtualServer{VirtualKey: vk}}, false},
		{plan.Bind{Addr: vk.Addr}, false},
		{plan.DelEntries{Set: "KUBE-CLUSTER-IP"}, false},
	} {
		if got := rulesFailed([]error{&OpError{Op: tt.op, Err: unix.EPERM}}); got != tt.want {
			t.Errorf("%v failed: rulesFailed %v, want %v", tt.op, got, tt.want)
		}
	}
}
