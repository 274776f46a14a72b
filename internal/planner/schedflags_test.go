package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// planLines syncs state into an empty kernel and returns the plan's lines
// that add virtual servers, and the errors.
func planVirtual(t *testing.T, p *Planner, state *model.State) ([]string, []error) {
	t.Helper()
	scope, errs := p.Update(state)
	desired, owners := p.Desired()
	var lines []string
	for _, line := range strings.Split(Diff(DiffInputs{Observed: NewKernelState(), Desired: desired, Services: owners, Scope: scope}).String(), "\n") {
		if strings.HasPrefix(line, "ipvs add ") {
			lines = append(lines, line)
		}
	}
	return lines, errs
}

func TestServiceSchedulerAndFlags(t *testing.T) {
	named := func(name, sched string, flags model.SchedulerFlags) model.ServicePort {
		s := fixture.Svc("ns", name, "", inet.TCP, 80, fmt.Sprintf("10.96.0.%d", len(name)))
		s.Scheduler, s.SchedulerFlags = sched, flags
		return s
	}
	tests := []struct {
		name      string
		node      string
		port      model.ServicePort
		want      string
		wantError string
	}{
		{"node default", "", named("a", "", 0), "rr", ""},
		{"node mh gets mh-port", "mh", named("a", "", 0), "mh mh-port", ""},
		{"own flags replace the node's", "mh", named("a", "", model.MHFallback), "mh mh-fallback", ""},
		{"own scheduler", "rr", named("ab", "sh", model.SHFallback|model.SHPort), "sh sh-fallback,sh-port", ""},
		{"own mh has only its flags", "rr", named("ab", "mh", 0), "mh", ""},
		{"kube-router's numbered flags", "rr", named("abc", "mh", model.SchedFlag1|model.SchedFlag2), "mh mh-fallback,mh-port", ""},
		{"flag the scheduler does not read", "rr", named("abc", "lc", model.SHPort), "lc", `schedulerFlags "sh-port" is ignored`},
		{"unknown scheduler", "wlc", named("abcd", "fastest", model.SHPort), "wlc", `scheduler "fastest": not an IPVS scheduler`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := fixture.Node()
			node.Scheduler = tt.node
			lines, errs := planVirtual(t, NewPlanner(nftrules.Render), &model.State{Node: node, Services: []model.ServicePort{tt.port}})
			want := fmt.Sprintf("ipvs add TCP %s:80 %s (%s)", tt.port.ClusterIPs[0], tt.want, tt.port.Name)
			if !slices.Equal(lines, []string{want}) {
				t.Errorf("plan %q, want %q", lines, want)
			}
			switch {
			case tt.wantError == "" && len(errs) > 0:
				t.Errorf("errors: %v", errs)
			case tt.wantError != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantError)):
				t.Errorf("errors %v, want one with %q", errs, tt.wantError)
			}
		})
	}
}

func TestMissingSchedulerFallsBack(t *testing.T) {
	p := NewPlanner(nftrules.Render)
	missing := fmt.Errorf("dataplane: IPVS scheduler %q: %w", "twos", errNoScheduler)
	p.LackScheduler("twos", missing)
	s := fixture.Svc("ns", "web", "", inet.TCP, 80, "10.96.0.1")
	s.Scheduler = "twos"
	lines, errs := planVirtual(t, p, &model.State{Node: fixture.Node(), Services: []model.ServicePort{s}})
	if want := "ipvs add TCP 10.96.0.1:80 rr (ns/web)"; !slices.Equal(lines, []string{want}) {
		t.Errorf("plan %q, want %q", lines, want)
	}
	var se *model.SchedulerError
	if len(errs) != 1 || !errors.As(errs[0], &se) || !errors.Is(errs[0], errNoScheduler) {
		t.Fatalf("errors %v, want a SchedulerError matching errNoScheduler", errs)
	}
	if se.Service != s.Name || se.Scheduler != "twos" || se.Fallback != "rr" {
		t.Errorf("error %+v", se)
	}
	// The problem is reported on every update while it lasts, and no
	// more once the service stops asking.
	if _, errs = p.Update(&model.State{Node: fixture.Node(), Services: []model.ServicePort{s}}); len(errs) != 1 {
		t.Errorf("second update: errors %v", errs)
	}
	s.Scheduler = ""
	if _, errs = p.Update(&model.State{Node: fixture.Node(), Services: []model.ServicePort{s}}); len(errs) != 0 {
		t.Errorf("after the annotation went: errors %v", errs)
	}
}

func TestSchedulerChangeEditsInPlace(t *testing.T) {
	p, kernel := NewPlanner(nftrules.Render), NewKernelState()
	s := fixture.Svc("ns", "cache", "", inet.TCP, 80, "10.96.0.9")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 8080, "node-a")}
	syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: []model.ServicePort{s}})
	for _, change := range []struct{ sched, want string }{{"sh", "sh sh-port"}, {"mh", "mh mh-fallback"}, {"", "rr"}} {
		s.Scheduler = change.sched
		s.SchedulerFlags = map[string]model.SchedulerFlags{"sh": model.SHPort, "mh": model.MHFallback}[change.sched]
		plan := syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: []model.ServicePort{s}})
		want := []Op{UpdateVirtual{Service: s.Name, Virtual: VirtualServer{
			VirtualKey: VirtualKey{Addr: fixture.IP("10.96.0.9"), Port: 80, Protocol: inet.TCP}, Scheduler: strings.Fields(change.want)[0],
			SchedulerFlags: kernelOnly(s.SchedulerFlags, change.sched)}}}
		if !slices.Equal(slices.Collect(plan.All()), want) {
			t.Errorf("to %q: plan\n%swant one edit, no delete", change.want, plan)
		}
		if got := plan.String(); !strings.Contains(got, "ipvs edit TCP 10.96.0.9:80 "+change.want+" ") {
			t.Errorf("to %q: printed plan %q", change.want, got)
		}
	}
}

// kernelOnly is the kernel bits of flags under a scheduler, for the tests.
func kernelOnly(f model.SchedulerFlags, sched string) model.SchedulerFlags {
	c, _ := (&model.Node{}).Scheduling(&model.ServicePort{Scheduler: sched, SchedulerFlags: f}, nil)
	return c.Flags
}

// A service's drain bound applies to the real servers of its virtual
// servers; others keep the node's.
func TestDrainTimeoutOverride(t *testing.T) {
	p, kernel := NewPlanner(nftrules.Render), NewKernelState()
	quick := fixture.Svc("ns", "quick", "", inet.TCP, 80, "10.96.0.1")
	quick.DrainTimeout = time.Minute
	slow := fixture.Svc("ns", "slow", "", inet.TCP, 80, "10.96.0.2")
	state := &model.State{Node: fixture.Node(), Services: []model.ServicePort{quick, slow}}
	syncAll(t, p, kernel, state)
	now := time.Now()
	drain := Drain{Since: map[VirtualKey]map[RealKey]time.Time{}, Timeout: 15 * time.Minute, Timeouts: p.DrainTimeouts(), Now: now}
	gone := RealServer{RealKey: RealKey{Addr: fixture.IP("10.244.1.5"), Port: 8080}, ActiveConns: 3}
	for _, addr := range []string{"10.96.0.1", "10.96.0.2"} {
		vk := VirtualKey{Addr: fixture.IP(addr), Port: 80, Protocol: inet.TCP}
		kernel.Reals[vk] = Reals{gone}
		drain.Since[vk] = map[RealKey]time.Time{gone.RealKey: now.Add(-5 * time.Minute)}
	}
	desired, owners := p.Desired()
	plan := Diff(DiffInputs{Observed: kernel, Desired: desired, Services: owners, Scope: FullScope, Drain: drain})
	want := []Op{DeleteReal{Virtual: VirtualKey{Addr: fixture.IP("10.96.0.1"), Port: 80, Protocol: inet.TCP}, Real: gone.RealKey}}
	if !slices.Equal(slices.Collect(plan.All()), want) {
		t.Errorf("plan\n%swant the quick service's real server deleted alone", plan)
	}
	// The bound goes with the annotation.
	quick.DrainTimeout = 0
	syncAll(t, p, kernel, &model.State{Node: fixture.Node(), Services: []model.ServicePort{quick, slow}})
	if len(p.DrainTimeouts()) != 0 {
		t.Errorf("drain bounds %v after the override went", p.DrainTimeouts())
	}
}

// errNoScheduler stands for the dataplane's probe finding a scheduler
// missing.
var errNoScheduler = errors.New("the kernel has no such IPVS scheduler")
