package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// planLines syncs state into an empty kernel and returns the plan's lines
// that add virtual servers, and the errors.
func TestSchedulerCacheProbesOnce(t *testing.T) {
	var probed []string
	transient := errors.New("netlink: busy")
	c := schedulerCache{known: map[string]error{}, probe: func(_ context.Context, name string) error {
		probed = append(probed, name)
		switch name {
		case "twos":
			return fmt.Errorf("scheduler %q: %w", name, ErrSchedulerNotSupported)
		case "ovf":
			return transient
		}
		return nil
	}}
	p := planner.NewPlanner(nftrules.Render)
	names := []string{"sh", "twos", "sh", "wlc", "fastest", "ovf", "twos"}
	node := &model.Node{Scheduler: "wlc"}
	errs := c.check(context.Background(), p, node, slices.Values(names))
	if want := []string{"sh", "twos", "ovf"}; !slices.Equal(probed, want) {
		t.Errorf("probed %q, want %q (not the node's, not an unknown name, each once)", probed, want)
	}
	if len(errs) != 1 || !errors.Is(errs[0], transient) {
		t.Errorf("errors %v, want the failed probe's", errs)
	}
	// The planner lacks twos alone: a port naming it gets the node's.
	twos, sh := fixture.Svc("default", "a", "", inet.TCP, 80, "10.96.0.1"), fixture.Svc("default", "b", "", inet.TCP, 80, "10.96.0.2")
	twos.Scheduler, sh.Scheduler = "twos", "sh"
	if _, errs := p.Update(&model.State{Node: fixture.Node(), Services: []model.ServicePort{twos, sh}}); len(errs) != 1 || !errors.Is(errs[0], ErrSchedulerNotSupported) {
		t.Errorf("the planner's errors %v, want twos's alone", errs)
	}
	probed = nil
	c.check(context.Background(), p, node, slices.Values(names))
	if want := []string{"ovf"}; !slices.Equal(probed, want) {
		t.Errorf("second check probed %q, want only the one that could not tell, %q", probed, want)
	}
}

// A scheduler the node does not allow Services to name is never tried:
// trying one loads its kernel module.
func TestSchedulerCacheSkipsNotAllowed(t *testing.T) {
	var probed []string
	c := schedulerCache{known: map[string]error{}, probe: func(_ context.Context, name string) error {
		probed = append(probed, name)
		return nil
	}}
	node := &model.Node{AllowedSchedulers: []string{"sh"}}
	c.check(context.Background(), planner.NewPlanner(nftrules.Render), node, slices.Values([]string{"sh", "twos", "mh"}))
	if want := []string{"sh"}; !slices.Equal(probed, want) {
		t.Errorf("probed %q, want %q: the allowed one alone", probed, want)
	}
}

// A change of scheduler or flags edits the virtual server in place: its
// connections and real servers stay.
