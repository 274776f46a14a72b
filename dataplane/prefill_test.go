package dataplane_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// A restart's prefills, from what it has listed so far, add what is new
// and leave alone what the last run programmed: the services not listed
// yet keep their virtual servers, a service keeps the real servers not
// listed yet. The Sync after them compares everything and removes what the
// whole state does not hold.
func TestPrefill(t *testing.T) {
	ctx := context.Background()
	last, n := newFakeDataplane(t, nil)
	web := fixture.Web()
	dns := fixture.Svc("kube-system", "dns", "", inet.UDP, 53, "10.96.0.53")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 53, "node-a")}
	gone := fixture.Svc("default", "gone", "", inet.TCP, 81, "10.96.0.81")
	gone.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.8", 8081, "node-a")}
	syncOK(t, last, ctx, &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{web, dns, gone}})
	if err := last.Close(); err != nil {
		t.Fatal(err)
	}

	// Made by another program: kube-proxy's virtual server of a service
	// listed last, which ipvsplane adopts, and one no service names.
	c := n.IPVS.Dial()
	kp := ipvs.Service{Protocol: inet.TCP, Addr: fixture.IP("10.96.0.90"), Port: 90, Scheduler: ipvs.RoundRobin}
	other := ipvs.Service{Protocol: inet.TCP, Addr: fixture.IP("10.96.1.1"), Port: 80, Scheduler: ipvs.RoundRobin}
	for _, s := range []ipvs.Service{kp, other} {
		if err := c.CreateService(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CreateDestination(ctx, kp, ipvs.Destination{Addr: fixture.IP("10.244.1.90"), Port: 9090, Forward: ipvs.Masquerade, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	adopted := fixture.Svc("default", "adopted", "", inet.TCP, 90, "10.96.0.90")
	adopted.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.90", 9090, "node-a")}

	d, err := n.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Listed so far: web with a second endpoint, and a new service.
	web.Endpoints = append(web.Endpoints, fixture.Ready("10.244.1.9", 8080, "node-a"))
	api := fixture.Svc("default", "api", "", inet.TCP, 443, "10.96.0.20")
	api.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.3", 8443, "node-a")}
	res, err := d.Prefill(ctx, &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{api, web}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	got := n.IPVS.Dump()
	for _, want := range []string{"TCP 10.96.0.20:443", "10.244.1.3:8443", "10.244.1.9:8080", "UDP 10.96.0.53:53", "10.244.1.5:53", "TCP 10.96.0.81:81", "TCP 10.96.0.90:90", "TCP 10.96.1.1:80"} {
		if !strings.Contains(got, want) {
			t.Errorf("after the prefill, IPVS lacks %q:\n%s", want, got)
		}
	}
	for op := range res.Plan.All() {
		if s := op.String(); strings.Contains(s, " del ") || strings.Contains(s, "unbind") {
			t.Errorf("the prefill removed something: %s", s)
		}
	}

	// Listed since: a new service and api's second endpoint, and web gone
	// again as a change (a deletion while listing); the changes alone are
	// planned, and only what they add.
	api.Endpoints = append(api.Endpoints, fixture.Ready("10.244.2.3", 8443, "node-b"))
	late := fixture.Svc("default", "late", "", inet.TCP, 82, "10.96.0.82")
	res, err = d.PrefillChanges(ctx, []model.Change{{Name: api.Name, Port: &api}, {Name: late.Name, Port: &late}, {Name: web.Name}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if got := res.Plan.String(); !strings.Contains(got, "10.244.2.3:8443") || !strings.Contains(got, "ipvs add TCP 10.96.0.82:82") ||
		strings.Contains(got, "10.96.0.10") || strings.Contains(got, "10.244.1.3") {
		t.Errorf("the changes' prefill:\n%s", got)
	}
	if got := n.IPVS.Dump(); !strings.Contains(got, "TCP 10.96.0.10:80") {
		t.Errorf("a prefill removed web:\n%s", got)
	}

	// Listed whole: dns and adopted too; gone is gone; late is not. The sync adopts
	// kube-proxy's virtual server as it is, and leaves the other one.
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{adopted, api, dns, web}}
	res = syncOK(t, d, ctx, state)
	if !res.Full || !strings.Contains(res.Plan.String(), "ipvs del TCP 10.96.0.81:81") || !strings.Contains(res.Plan.String(), "ipvs del TCP 10.96.0.82:82") {
		t.Errorf("the sync after the prefills: full=%v, want a full one that removes gone:\n%s", res.Full, res.Plan)
	}
	// web's external IP waited for the whole state (see
	// TestPrefillLeavesTenantClaimsToTheFullSync): its new real server
	// comes now.
	held := "ipvs add TCP 198.51.100.10:80 -> 10.244.1.9:8080 weight 1\n"
	if got := res.Plan.String(); !strings.Contains(got, held) {
		t.Errorf("the sync after the prefills did not add the external IP's new real server:\n%s", got)
	}
	if got := strings.Replace(res.Plan.String(), held, "", 1); strings.Contains(got, "ipvs add") || strings.Contains(got, "10.96.1.1") {
		t.Errorf("the sync after the prefills added again what is there, or touched another program's:\n%s", got)
	}
	checkKernel(t, n, state)
	if got := n.IPVS.Dump(); !strings.Contains(got, "TCP 10.96.1.1:80") {
		t.Errorf("another program's virtual server is gone:\n%s", got)
	}
	if res := syncOK(t, d, ctx, state); res.Full || res.Plan.Len() != 0 {
		t.Errorf("the next sync: full=%v\n%s", res.Full, res.Plan)
	}
}

// PrefillChanges needs a Prefill that read the kernel first.
func TestPrefillChangesFirst(t *testing.T) {
	d, _ := newFakeDataplane(t, nil)
	web := fixture.Web()
	if _, err := d.PrefillChanges(context.Background(), []model.Change{{Name: web.Name, Port: &web}}); !errors.Is(err, dataplane.ErrNotSynced) {
		t.Errorf("PrefillChanges before a Prefill: %v, want ErrNotSynced", err)
	}
}

// A restart lists namespaces in order, so a tenant's Service in "billing"
// comes before default/kubernetes and kube-system's DNS. Naming their
// cluster IPs as its external IPs, it would own their virtual servers in
// the partial state, and a prefill would add its pods to them as real
// servers until the first full sync. Claims through external IPs and
// load-balancer addresses wait for the whole state.
func TestPrefillLeavesTenantClaimsToTheFullSync(t *testing.T) {
	ctx := context.Background()
	last, n := newFakeDataplane(t, nil)
	api := fixture.Svc("default", "kubernetes", "https", inet.TCP, 443, "10.96.0.1")
	api.Endpoints = []model.Endpoint{fixture.Ready("192.168.0.1", 6443, "")}
	dns := fixture.Svc("kube-system", "kube-dns", "dns", inet.UDP, 53, "10.96.0.10")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 53, "node-a")}
	syncOK(t, last, ctx, &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{api, dns}})
	if err := last.Close(); err != nil {
		t.Fatal(err)
	}

	d, err := n.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tenant := fixture.Svc("billing", "x", "", inet.TCP, 443, "10.96.0.50")
	tenant.ExternalIPs = fixture.IPs("10.96.0.1")
	tenant.Endpoints = []model.Endpoint{fixture.Ready("10.244.9.9", 8443, "node-a")}
	tenantDNS := fixture.Svc("billing", "y", "", inet.UDP, 53, "10.96.0.51")
	tenantDNS.LoadBalancerIPs = fixture.IPs("10.96.0.10")
	tenantDNS.Endpoints = []model.Endpoint{fixture.Ready("10.244.9.10", 53, "node-a")}
	res, err := d.Prefill(ctx, &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{tenant, tenantDNS}})
	if err != nil {
		t.Fatal(err)
	}
	apiVS, dnsVS := ipvs.Service{Protocol: inet.TCP, Addr: fixture.IP("10.96.0.1"), Port: 443}, ipvs.Service{Protocol: inet.UDP, Addr: fixture.IP("10.96.0.10"), Port: 53}
	checkReals(t, "after the prefill", n, apiVS, "192.168.0.1:6443")
	checkReals(t, "after the prefill", n, dnsVS, "10.244.1.5:53")
	if got := res.Plan.String(); !strings.Contains(got, "ipvs add TCP 10.96.0.50:443") {
		t.Errorf("the prefill left out the tenant's own cluster IP:\n%s", got)
	}

	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{tenant, tenantDNS, api, dns}}
	if res, err = d.Sync(ctx, state); err != nil {
		t.Fatal(err)
	}
	for _, err := range res.Errors {
		if conflict := new(plan.ConflictError); !errors.As(err, &conflict) {
			t.Errorf("sync: %v", err)
		}
	}
	checkReals(t, "after the full sync", n, apiVS, "192.168.0.1:6443")
	checkReals(t, "after the full sync", n, dnsVS, "10.244.1.5:53")
}

// checkReals fails the test unless the virtual server's real servers are
// want.
func checkReals(t *testing.T, when string, n *dataplanetest.Node, vs ipvs.Service, want ...string) {
	t.Helper()
	dests, err := n.IPVS.Dial().Destinations(context.Background(), vs)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	var got []string
	for _, d := range dests {
		got = append(got, netip.AddrPortFrom(d.Addr, d.Port).String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s %v has real servers %v, want %v", when, vs.Protocol, netip.AddrPortFrom(vs.Addr, vs.Port), got, want)
	}
}
