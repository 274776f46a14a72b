package dataplane_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"golang.org/x/sys/unix"
)

// flowTable puts NATed flows in a fake kernel's conntrack table, each
// from its own client port, and tells which are left.
type flowTable struct {
	t    *testing.T
	n    *dataplanetest.Node
	port uint16
}

// add tracks a flow of proto to dst that src answers, and returns its
// name.
func (ft *flowTable) add(proto inet.Protocol, dst, src string) string {
	ft.t.Helper()
	ft.port++
	client := netip.AddrPortFrom(fixture.IP("192.168.0.2"), 40000+ft.port)
	d, s := netip.MustParseAddrPort(dst), netip.MustParseAddrPort(src)
	f := conntrack.Flow{
		Orig:  conntrack.Tuple{Src: client.Addr(), Dst: d.Addr(), Protocol: proto, SrcPort: client.Port(), DstPort: d.Port()},
		Reply: conntrack.Tuple{Src: s.Addr(), Dst: client.Addr(), Protocol: proto, SrcPort: s.Port(), DstPort: client.Port()},
	}
	if err := ft.n.Flows.Add(f); err != nil {
		ft.t.Fatal(err)
	}
	return flowName(f)
}

func flowName(f conntrack.Flow) string {
	return f.Orig.Protocol.String() + " " + netip.AddrPortFrom(f.Orig.Dst, f.Orig.DstPort).String() + " by " + netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort).String()
}

// check fails the test unless the table holds kept and none of gone.
func (ft *flowTable) check(what string, kept, gone []string) {
	ft.t.Helper()
	var have []string
	for _, f := range ft.n.Flows.Flows() {
		have = append(have, flowName(f))
	}
	for _, k := range kept {
		if !slices.Contains(have, k) {
			ft.t.Errorf("%s: the flow %s was deleted", what, k)
		}
	}
	for _, g := range gone {
		if slices.Contains(have, g) {
			ft.t.Errorf("%s: the stale flow %s is still tracked", what, g)
		}
	}
}

// A sync after which a UDP service's endpoints changed deletes the flows
// to its addresses and node port that no serving endpoint answers,
// whenever they were made, and keeps those of endpoints still serving,
// terminating ones too; the first sync does it for every service, as
// kube-proxy's first sync does.
func TestSyncReconcilesFlows(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	ft := &flowTable{t: t, n: n}
	dns := fixture.Svc("kube-system", "dns", "", inet.UDP, 53, "10.96.0.53")
	dns.NodePort = 30053
	dns.ExternalIPs = fixture.IPs("198.51.100.53")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 5353, "node-a"), fixture.Ready("10.244.2.2", 5353, "node-b")}
	web := fixture.Web()
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{dns, web}}

	// Left by a proxy before this one.
	kept := []string{
		ft.add(inet.UDP, "10.96.0.53:53", "10.244.1.2:5353"),
		ft.add(inet.UDP, "192.168.0.1:30053", "10.244.2.2:5353"),
		ft.add(inet.TCP, "10.96.0.53:53", "10.244.9.9:5353"),
		ft.add(inet.UDP, "10.96.0.99:53", "10.244.9.9:5353"),
		ft.add(inet.UDP, "10.96.0.10:80", "10.244.9.9:8080"),
	}
	gone := []string{
		ft.add(inet.UDP, "10.96.0.53:53", "10.244.9.9:5353"),
		ft.add(inet.UDP, "198.51.100.53:53", "10.244.9.9:5353"),
		ft.add(inet.UDP, "192.168.0.1:30053", "10.244.9.9:5353"),
	}
	res := syncOK(t, d, context.Background(), state)
	if !strings.Contains(res.Plan.String(), "conntrack reconcile udp IPv4\n") {
		t.Errorf("the first sync does not reconcile:\n%s", res.Plan)
	}
	if f := res.Flows; !f.Ran.Get(inet.IPv4) || f.Deleted.Get(inet.IPv4) != len(gone) || f.Ran.Get(inet.IPv6) {
		t.Errorf("the first sync's tally %+v, want %d IPv4 flows deleted", f, len(gone))
	}
	ft.check("first sync", kept, gone)

	// An endpoint terminates while serving, another leaves: only the
	// latter's flows go. The terminating one still answers its clients.
	removed := ft.add(inet.UDP, "10.96.0.53:53", "10.244.2.2:5353")
	terminating := ft.add(inet.UDP, "10.96.0.53:53", "10.244.1.2:5353")
	stale := ft.add(inet.UDP, "10.96.0.53:53", "10.244.8.8:5353")
	dns.Endpoints = []model.Endpoint{
		{Addr: fixture.IP("10.244.1.2"), Port: 5353, Serving: true, Terminating: true, NodeName: "node-a"},
		fixture.Ready("10.244.3.2", 5353, "node-b"),
	}
	res, err := d.SyncChanges(context.Background(), []model.Change{{Name: dns.Name, Port: &dns}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	ft.check("endpoints changed", []string{terminating, kept[2]}, []string{removed, stale, kept[1]})

	// A change to a TCP service alone reconciles nothing.
	stale = ft.add(inet.UDP, "10.96.0.53:53", "10.244.8.8:5353")
	web.Endpoints = web.Endpoints[:1]
	state.Services = []model.ServicePort{dns, web}
	if res := syncOK(t, d, context.Background(), state); strings.Contains(res.Plan.String(), "conntrack") || res.Flows.Ran.Get(inet.IPv4) {
		t.Errorf("a TCP change reconciled conntrack:\n%s", res.Plan)
	}
	ft.check("TCP change", []string{stale}, nil)
}

// A reconciliation that fails is reported, and the next sync runs it
// again, changes or not.
func TestSyncReconcileRetried(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	ft := &flowTable{t: t, n: n}
	dns := fixture.Svc("kube-system", "dns", "", inet.UDP, 53, "10.96.0.53")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 5353, "node-a")}
	stale := ft.add(inet.UDP, "10.96.0.53:53", "10.244.9.9:5353")
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{dns}}
	refuse := fault.With(context.Background(), func(pkg, req string) error {
		if pkg == "conntrack" && req == "delete" {
			return unix.EPERM
		}
		return nil
	})
	res, err := d.Sync(refuse, state)
	if err != nil {
		t.Fatal(err)
	}
	if op := onlyFailure(t, res, unix.EPERM); op != (plan.ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP}) {
		t.Errorf("failed operation %v, want the reconciliation", op)
	}
	ft.check("refused", []string{stale}, nil)
	res = syncOK(t, d, context.Background(), state)
	if !strings.Contains(res.Plan.String(), "conntrack reconcile udp IPv4") || res.Flows.Deleted.Get(inet.IPv4) != 1 {
		t.Errorf("the next sync did not reconcile again (%+v):\n%s", res.Flows, res.Plan)
	}
	ft.check("next sync", nil, []string{stale})
	if res := syncOK(t, d, context.Background(), state); res.Plan.Len() != 0 {
		t.Errorf("a sync after the reconciliation ran:\n%s", res.Plan)
	}
}
