package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// A background read may have seen what the syncs changed while it ran
// before or after the change: there the programmed state stands, and
// everywhere else the read.
func TestMergeRead(t *testing.T) {
	addr := netip.MustParseAddr
	added := plan.VirtualKey{Addr: addr("10.96.0.1"), Port: 80, Protocol: inet.TCP}
	removed := plan.VirtualKey{Addr: addr("10.96.0.2"), Port: 80, Protocol: inet.TCP}
	drifted := plan.VirtualKey{Addr: addr("10.96.0.3"), Port: 80, Protocol: inet.TCP}
	reals := func(weight int) plan.Reals {
		return planner.NewReals([]plan.RealServer{{RealKey: plan.RealKey{Addr: addr("10.244.0.1"), Port: 8080}, Weight: weight}})
	}
	programmed := plan.NewKernelState()
	programmed.Virtual[added] = plan.VirtualServer{VirtualKey: added, Scheduler: "rr"}
	programmed.Reals[added] = reals(1)
	programmed.Virtual[drifted] = plan.VirtualServer{VirtualKey: drifted, Scheduler: "rr"}
	programmed.Reals[drifted] = reals(1)
	programmed.Addresses[addr("10.96.0.1")] = true
	programmed.Entries["KUBE-CLUSTER-IP"] = map[plan.Entry]bool{ce("10.96.0.1"): true}

	// The reader saw the kernel before the syncs added one service and
	// removed another, and a weight changed behind the dataplane's back.
	observed := plan.NewKernelState()
	observed.Virtual[removed] = plan.VirtualServer{VirtualKey: removed, Scheduler: "rr"}
	observed.Reals[removed] = reals(1)
	observed.Virtual[drifted] = plan.VirtualServer{VirtualKey: drifted, Scheduler: "rr"}
	observed.Reals[drifted] = reals(7)
	observed.Addresses[addr("10.96.0.2")] = true
	observed.Entries["KUBE-CLUSTER-IP"] = map[plan.Entry]bool{ce("10.96.0.2"): true, ce("10.96.0.3"): true}

	since := planner.NewScope()
	since.Virtual[added] = true
	since.Virtual[removed] = true
	since.Addresses[addr("10.96.0.1")] = true
	since.Addresses[addr("10.96.0.2")] = true
	since.Touch(plan.AddEntries{Set: "KUBE-CLUSTER-IP", Entries: []plan.Entry{ce("10.96.0.1"), ce("10.96.0.2")}})

	got := mergeRead(observed, programmed, *since)
	if _, ok := got.Virtual[added]; !ok || len(got.Reals[added]) != 1 {
		t.Errorf("the virtual server a sync added meanwhile is missing: %v", got.Virtual)
	}
	if _, ok := got.Virtual[removed]; ok {
		t.Errorf("the virtual server a sync removed meanwhile is still there")
	}
	if _, ok := got.Reals[removed]; ok {
		t.Errorf("the real servers of the removed virtual server are still there")
	}
	if r := got.Reals[drifted]; len(r) != 1 || r[0].Weight != 7 {
		t.Errorf("the drift the reader saw is lost: %v", r)
	}
	if !got.Addresses[addr("10.96.0.1")] || got.Addresses[addr("10.96.0.2")] {
		t.Errorf("addresses: %v", got.Addresses)
	}
	want := map[plan.Entry]bool{ce("10.96.0.1"): true, ce("10.96.0.3"): true}
	if e := got.Entries["KUBE-CLUSTER-IP"]; len(e) != len(want) || !e[ce("10.96.0.1")] || !e[ce("10.96.0.3")] {
		t.Errorf("entries: %v, want %v", e, want)
	}
}

// ce is the KUBE-CLUSTER-IP entry of an address's TCP port 80.
func ce(a string) plan.Entry {
	return plan.Entry{Addr: netip.MustParseAddr(a), Protocol: inet.TCP, Port: 80}
}

// The periodic reread starts a ResyncInterval after the last one started,
// and, after a read of two seconds or more, no sooner than nine times its
// duration after it ended.
func TestResyncDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		took  time.Duration
		after time.Duration // since the last read started
		due   bool
	}{
		{"short read, interval not over", time.Second, 29 * time.Second, false},
		{"short read, interval over", time.Second, 30 * time.Second, true},
		{"quick read, not held back", 1900 * time.Millisecond, 30 * time.Second, true},
		{"slow read, not rested", 4 * time.Second, 30 * time.Second, false},
		{"long read, interval over, not rested", 20 * time.Second, 60 * time.Second, false},
		{"long read, rested", 20 * time.Second, 200 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.after)
			r := &rereader{
				cfg:      &Config{ResyncInterval: 30 * time.Second, Now: func() time.Time { return now }},
				lastFull: t0,
				last:     rereadTiming{ended: t0.Add(tc.took), took: tc.took},
			}
			if got := r.due(false); got != tc.due {
				t.Errorf("due(false) = %v, want %v", got, tc.due)
			}
		})
	}
}
