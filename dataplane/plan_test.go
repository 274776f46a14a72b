package dataplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// A panic in the planner, which only a bug can cause, comes back as a
// *PlanPanicError naming the changes planned, and leaves an empty planner
// that still knows the schedulers the kernel lacks: the next call must be
// a Sync of a whole state.
func TestPlanPanicDropsThePlanner(t *testing.T) {
	lacking := &model.SchedulerError{Service: model.ServicePortName{}, Scheduler: "sed", Err: ErrSchedulerNotSupported}
	d := &Dataplane{planner: planner.NewPlanner(nftrules.Render), ledger: newLedger(nil), settings: nodeSettings{schedulers: schedulerCache{known: map[string]error{"sed": lacking}}}}
	web := fixture.Web()
	d.planner.Update(&model.State{Node: fixture.VMNode(), Services: []model.ServicePort{web}})
	changes := []model.Change{{Name: web.Name, Port: &web}}
	_, _, err := d.plan(changes, func() (planner.Scope, []error) { panic("index out of range") })
	var pe *PlanPanicError
	if !errors.As(err, &pe) || len(pe.Services) != 1 || pe.Services[0] != web.Name || !strings.Contains(string(pe.Stack), "TestPlanPanicDropsThePlanner") {
		t.Fatalf("error %v, want a *PlanPanicError naming %v with its stack", err, web.Name)
	}
	if !strings.Contains(err.Error(), "default/web:http") || !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("error text: %v", err)
	}
	if d.planner.Node() != nil {
		t.Error("the planner was kept")
	}
	sed := fixture.Svc("default", "sed", "", inet.TCP, 80, "10.96.0.30")
	sed.Scheduler = "sed"
	_, errs := d.planner.Update(&model.State{Node: fixture.VMNode(), Services: []model.ServicePort{sed}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"sed"`) {
		t.Errorf("the new planner does not know the kernel lacks sed: %v", errs)
	}
}
