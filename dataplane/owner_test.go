package dataplane_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// sortedKeys returns keys sorted, to compare lists of virtual servers.
func sortedKeys(keys []plan.VirtualKey) []plan.VirtualKey {
	return slices.SortedFunc(slices.Values(keys), func(a, b plan.VirtualKey) int { return cmp.Compare(a.String(), b.String()) })
}

// Claims answers from the planner's index which virtual servers a
// service port claims: those plan.VirtualKeys works out from the model,
// a virtual server another port owns among them, never a health-check
// node port. Owner gives each to one of its claimants. A port left out
// as invalid, removed or unknown has none.
func TestClaims(t *testing.T) {
	ctx := context.Background()
	d, _ := newFakeDataplane(t, nil)
	node := fixture.VMNode()
	web := fixture.Web()
	web.LoadBalancerIPs = fixture.IPs("192.0.2.80")
	web.ExternalPolicy, web.HealthCheckNodePort = model.PolicyLocal, 32000
	// A tenant's external IP on web's cluster IP: web keeps it.
	squat := fixture.Svc("tenant", "squat", "", inet.TCP, 80, "10.96.0.99")
	squat.ExternalIPs = web.ClusterIPs
	bad := fixture.Svc("default", "bad", "", inet.TCP, 0, "10.96.0.98")
	res, err := d.Sync(ctx, &model.State{Node: node, Services: []model.ServicePort{web, squat, bad}})
	if err != nil {
		t.Fatal(err)
	}
	var conflict *plan.ConflictError
	if len(res.Errors) != 2 || !errors.As(res.Errors[1], &conflict) {
		t.Fatalf("errors %v, want bad's and squat's conflict", res.Errors)
	}
	check := func(ports ...model.ServicePort) {
		t.Helper()
		for i := range ports {
			sp := &ports[i]
			got := d.Claims(sp.Name)
			if want := plan.VirtualKeys(&node, sp); !slices.Equal(sortedKeys(got), sortedKeys(want)) {
				t.Errorf("%s claims %v, want %v", sp.Name, got, want)
			}
			for _, k := range got {
				if owner, ok := d.Owner(k); !ok || owner != sp.Name && !slices.Contains(d.Claims(owner), k) {
					t.Errorf("%s, claimed by %s, is owned by %v (%v)", k, sp.Name, owner, ok)
				}
			}
		}
	}
	check(web, squat)
	if len(d.Claims(web.Name)) != 4 {
		t.Errorf("web claims %v, want its cluster IP, external IP, load balancer and node port", d.Claims(web.Name))
	}
	contested := plan.VirtualKey{Addr: web.ClusterIPs[0], Port: 80, Protocol: inet.TCP}
	if owner, _ := d.Owner(contested); owner != web.Name || !slices.Contains(d.Claims(squat.Name), contested) {
		t.Errorf("%s is %v's, claimed by squat: %v", contested, owner, d.Claims(squat.Name))
	}
	for _, name := range []model.ServicePortName{bad.Name, {Namespace: "default", Name: "unknown"}} {
		if keys := d.Claims(name); keys != nil {
			t.Errorf("%s claims %v", name, keys)
		}
	}

	// Changes: web loses its external IP, squat goes.
	web.ExternalIPs = nil
	if _, err := d.SyncChanges(ctx, []model.Change{{Name: web.Name, Port: &web}, {Name: squat.Name}}); err != nil {
		t.Fatal(err)
	}
	check(web)
	if keys := d.Claims(squat.Name); keys != nil {
		t.Errorf("squat, removed, claims %v", keys)
	}
}

// Another program's virtual server at a port's external IP is not the
// port's (TestForeignVirtualServerNotAdopted): Claims leaves it out,
// where plan.VirtualKeys, from the model alone, lists it; Owner gives
// it to no port either way.
func TestClaimsLeaveOutForeign(t *testing.T) {
	ctx := context.Background()
	d, n := newFakeDataplane(t, nil)
	makeVIP(t, n, false)
	node, web := fixture.VMNode(), fixture.Web()
	if _, err := d.Sync(ctx, &model.State{Node: node, Services: []model.ServicePort{web}}); err != nil {
		t.Fatal(err)
	}
	foreign := plan.VirtualKey{Addr: vip.Addr, Port: vip.Port, Protocol: vip.Protocol}
	if !slices.Contains(plan.VirtualKeys(&node, &web), foreign) {
		t.Fatalf("plan.VirtualKeys %v, without the external IP's", plan.VirtualKeys(&node, &web))
	}
	if keys := d.Claims(web.Name); slices.Contains(keys, foreign) || len(keys) != 2 {
		t.Errorf("web claims %v, want its cluster IP and node port", keys)
	}
	if owner, ok := d.Owner(foreign); ok {
		t.Errorf("another program's virtual server is %v's", owner)
	}
}
