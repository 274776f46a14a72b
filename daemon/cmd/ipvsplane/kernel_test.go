package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
)

// fakeKernel records the calls the commands make: the commands' tests
// check which ones a command makes, and in what order, and a start that
// fails makes none; what the syncs program is package proxier's to test,
// on a real Dataplane. If synced is not nil, each sync sends its service
// ports on it.
type fakeKernel struct {
	calls  []string
	synced chan []model.ServicePort
	// noScheduler fails CheckScheduler.
	noScheduler bool
}

func (k *fakeKernel) Owner(plan.VirtualKey) (model.ServicePortName, bool) {
	return model.ServicePortName{}, false
}

func (k *fakeKernel) Claims(model.ServicePortName) []plan.VirtualKey { return nil }

func (k *fakeKernel) InitNode(context.Context, *model.Node) error {
	k.calls = append(k.calls, "init")
	return nil
}

func (k *fakeKernel) ReadAhead(context.Context) error { return nil }

func (k *fakeKernel) CheckScheduler(_ context.Context, name string) error {
	if k.noScheduler {
		return fmt.Errorf("dataplane: IPVS scheduler %q: %w: its kernel module ip_vs_%s is missing", name, dataplane.ErrSchedulerNotSupported, name)
	}
	return nil
}

func (k *fakeKernel) Sync(_ context.Context, s *model.State) (*dataplane.Result, error) {
	k.calls = append(k.calls, "sync")
	if k.synced != nil {
		k.synced <- s.Services
	}
	return &dataplane.Result{Plan: &plan.Plan{}, Full: !slices.Contains(k.calls[:len(k.calls)-1], "sync")}, nil
}

func (k *fakeKernel) Prefill(context.Context, *model.State) (*dataplane.Result, error) {
	k.calls = append(k.calls, "prefill")
	return &dataplane.Result{Plan: plan.New(plan.Bind{Addr: netip.MustParseAddr("10.96.0.80")})}, nil
}

func (k *fakeKernel) PrefillChanges(context.Context, []model.Change) (*dataplane.Result, error) {
	k.calls = append(k.calls, "prefill changes")
	return &dataplane.Result{Plan: &plan.Plan{}}, nil
}

func (k *fakeKernel) SyncChanges(_ context.Context, c []model.Change) (*dataplane.Result, error) {
	k.calls = append(k.calls, "changes")
	if k.synced != nil {
		var ports []model.ServicePort
		for _, ch := range c {
			if ch.Port != nil {
				ports = append(ports, *ch.Port)
			}
		}
		k.synced <- ports
	}
	return &dataplane.Result{Plan: &plan.Plan{}}, nil
}

func (k *fakeKernel) DryRun(context.Context, *model.State) (*plan.Plan, []error, error) {
	k.calls = append(k.calls, "dry-run")
	// A first sync's plan against a kernel that holds the desired state:
	// the reconciliation kube-proxy's first sync runs too.
	return plan.New(plan.ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP}), nil, nil
}

func (k *fakeKernel) Handover(context.Context) error {
	k.calls = append(k.calls, "handover")
	return nil
}

func (k *fakeKernel) Cleanup(context.Context) error {
	k.calls = append(k.calls, "cleanup")
	return nil
}

func (k *fakeKernel) Close() error { return nil }

// webManifest is the Service and EndpointSlice most tests feed.
const webManifest = kubetest.WebManifest
