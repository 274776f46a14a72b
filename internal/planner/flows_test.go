package planner

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// The entries kube-proxy v1.37's CleanStaleEntries deletes and keeps
// (pkg/proxy/conntrack/cleanup.go and its tests), case by case.
func TestFlowMatcherPolicy(t *testing.T) {
	dns := fixture.Svc("kube-system", "dns", "dns", inet.UDP, 53, "10.96.0.10", "fd00:96::10")
	dns.NodePort = 30053
	dns.ExternalIPs = fixture.IPs("198.51.100.10", "2001:db8::10")
	dns.LoadBalancerIPs = fixture.IPs("203.0.113.10")
	dns.ExternalPolicy = model.PolicyLocal
	dns.Endpoints = []model.Endpoint{
		fixture.Ready("10.244.1.2", 5353, "node-b"),
		{Addr: fixture.IP("10.244.1.3"), Port: 5353, Serving: true, Terminating: true, NodeName: "node-a"},
		{Addr: fixture.IP("10.244.1.4"), Port: 5353, Terminating: true},
		fixture.Ready("fd00:244::2", 5353, "node-b"),
	}
	// No serving endpoint: its addresses' entries all go, its node port's
	// stay.
	empty := fixture.Svc("default", "empty", "", inet.UDP, 514, "10.96.0.20")
	empty.NodePort = 30514
	empty.Endpoints = []model.Endpoint{{Addr: fixture.IP("10.244.2.2"), Port: 514}}
	// An external IP two services claim: an entry either's endpoint
	// answers stays.
	shared := fixture.Svc("default", "shared", "", inet.UDP, 53, "10.96.0.30")
	shared.ExternalIPs = fixture.IPs("198.51.100.10")
	shared.Endpoints = []model.Endpoint{fixture.Ready("10.244.3.2", 5353, "node-b")}
	// Its service port is dns's node port: an entry to it is checked
	// against both.
	high := fixture.Svc("default", "high", "", inet.UDP, 30053, "10.96.0.40")
	high.Endpoints = []model.Endpoint{fixture.Ready("10.244.4.2", 30053, "node-b")}
	tcp := fixture.Svc("default", "web", "", inet.TCP, 53, "10.96.0.50")
	tcp.Endpoints = []model.Endpoint{fixture.Ready("10.244.5.2", 8080, "node-b")}
	// No IPv6 cluster IP: not in IPv6's reconciliation.
	v4only := fixture.Svc("default", "v4only", "", inet.UDP, 123, "10.96.0.60")
	v4only.ExternalIPs = fixture.IPs("2001:db8::60")

	p := NewPlanner(nftrules.Render)
	p.Update(&model.State{Node: fixture.Node(), Services: []model.ServicePort{dns, empty, shared, high, tcp, v4only}})
	v4 := p.FlowMatcher(ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP})
	v6 := p.FlowMatcher(ReconcileFlows{Family: inet.IPv6, Protocol: inet.UDP})
	ap := netip.MustParseAddrPort
	for _, tt := range []struct {
		m        *FlowMatcher
		dst, src string
		stale    bool
	}{
		{v4, "10.96.0.10:53", "10.244.1.2:5353", false},
		{v4, "10.96.0.10:53", "10.244.1.3:5353", false}, // terminating, serving
		{v4, "10.96.0.10:53", "10.244.1.4:5353", true},  // not serving
		{v4, "10.96.0.10:53", "10.244.9.9:5353", true},  // gone
		{v4, "10.96.0.10:53", "10.244.1.2:53", true},    // another port
		{v4, "198.51.100.10:53", "10.244.9.9:5353", true},
		{v4, "198.51.100.10:53", "10.244.1.2:5353", false},
		{v4, "198.51.100.10:53", "10.244.3.2:5353", false}, // shared's
		{v4, "203.0.113.10:53", "10.244.9.9:5353", true},
		{v4, "192.168.0.10:30053", "10.244.9.9:5353", true}, // node port, any address
		{v4, "192.0.2.1:30053", "10.244.1.2:5353", false},
		{v4, "10.96.0.20:514", "10.244.2.2:514", true},
		{v4, "192.168.0.10:30514", "10.244.9.9:514", false}, // no serving endpoint
		{v4, "10.96.0.40:30053", "10.244.4.2:30053", true},  // high's own, but dns's node port
		{v4, "10.96.0.50:53", "10.244.9.9:8080", false},     // TCP service
		{v4, "10.96.0.10:54", "10.244.9.9:5353", false},
		{v4, "10.96.0.99:53", "10.244.9.9:5353", false},
		{v4, "10.96.0.60:123", "10.244.9.9:123", true},
		{v6, "[fd00:96::10]:53", "[fd00:244::2]:5353", false},
		{v6, "[fd00:96::10]:53", "[fd00:244::9]:5353", true},
		{v6, "[2001:db8::10]:53", "[fd00:244::9]:5353", true},
		{v6, "[fd00:1::10]:30053", "[fd00:244::9]:5353", true},
		{v6, "[2001:db8::60]:123", "[fd00:244::9]:123", false},
	} {
		if got := tt.m.Stale(ap(tt.dst), ap(tt.src)); got != tt.stale {
			t.Errorf("entry to %s answered by %s: stale %v, want %v", tt.dst, tt.src, got, tt.stale)
		}
	}
	if m := p.FlowMatcher(ReconcileFlows{Family: inet.IPv4, Protocol: inet.SCTP}); !m.Empty() {
		t.Errorf("an SCTP matcher without SCTP ports is not empty")
	}
}

// Which updates make a reconciliation due: kube-proxy's endpoints change
// tracker's ConntrackCleanupRequired, by family.
func TestPlannerReconciles(t *testing.T) {
	dns := fixture.Svc("kube-system", "dns", "dns", inet.UDP, 53, "10.96.0.10", "fd00:96::10")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 53, "node-b"), fixture.Ready("fd00:244::2", 53, "node-b")}
	dnsTCP := fixture.Svc("kube-system", "dns", "dns-tcp", inet.TCP, 53, "10.96.0.10", "fd00:96::10")
	dnsTCP.Endpoints = dns.Endpoints
	web := fixture.Web()
	sctp := fixture.Svc("default", "signal", "", inet.SCTP, 3868, "10.96.0.40")
	sctp.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.3", 3868, "node-b")}
	node := fixture.Node()
	p := NewPlanner(nftrules.Render)
	update := func(ports ...model.ServicePort) string {
		t.Helper()
		p.Update(&model.State{Node: node, Services: ports})
		due := fmt.Sprint(p.Reconciles())
		for _, op := range p.Reconciles() {
			p.Reconciled(op)
		}
		return due
	}
	udp4, udp6 := ReconcileFlows{inet.IPv4, inet.UDP}, ReconcileFlows{inet.IPv6, inet.UDP}
	want := func(ops ...ReconcileFlows) string { return fmt.Sprint(slices.Clip(ops)) }
	// dns's TCP port with one more IPv4 endpoint than its UDP port.
	tcp2 := withEndpoints(dnsTCP, append(slices.Clone(dns.Endpoints), fixture.Ready("10.244.1.3", 53, "node-b"))...)
	steps := []struct {
		name  string
		ports []model.ServicePort
		want  string
	}{
		{"first update", []model.ServicePort{dns, dnsTCP, web}, want(udp4, udp6)},
		{"nothing changed", []model.ServicePort{dns, dnsTCP, web}, want()},
		{"a TCP service's endpoints", []model.ServicePort{dns, dnsTCP, withEndpoints(web, fixture.Ready("10.244.9.9", 8080, "node-b"))}, want()},
		{"the TCP port of a service with a UDP one", []model.ServicePort{dns, tcp2, web}, want(udp4)},
		{"IPv6 endpoints alone", []model.ServicePort{withEndpoints(dns, dns.Endpoints[0]), tcp2, web}, want(udp6)},
		{"an endpoint's condition", []model.ServicePort{withEndpoints(dns, notReady(dns.Endpoints[0])), tcp2, web}, want(udp4)},
		{"a new address, no endpoint changed", []model.ServicePort{withExternalIP(withEndpoints(dns, notReady(dns.Endpoints[0])), "198.51.100.10"), tcp2, web}, want()},
		{"the UDP port removed", []model.ServicePort{tcp2, web}, want(udp4)},
		{"a UDP port without endpoints", []model.ServicePort{tcp2, web, withEndpoints(dns)}, want()},
		{"SCTP", []model.ServicePort{tcp2, web, withEndpoints(dns), sctp}, want(ReconcileFlows{inet.IPv4, inet.SCTP})},
	}
	for _, s := range steps {
		if got := update(s.ports...); got != s.want {
			t.Errorf("%s: due %s, want %s", s.name, got, s.want)
		}
	}

	// A reconciliation that did not run stays due; a node without IPv6
	// has none of IPv6.
	p = NewPlanner(nftrules.Render)
	node.IPv4Only = true
	p.Update(&model.State{Node: node, Services: []model.ServicePort{dns}})
	p.Update(&model.State{Node: node, Services: []model.ServicePort{dns, web}})
	if got := fmt.Sprint(p.Reconciles()); got != want(udp4) {
		t.Errorf("IPv4 alone, not run: due %s, want %s", got, want(udp4))
	}
	if got := fmt.Sprint(FirstReconciles(&model.State{Node: fixture.Node(), Services: []model.ServicePort{web, dns}})); got != want(udp4, udp6) {
		t.Errorf("FirstReconciles: %s", got)
	}
}

func withEndpoints(sp model.ServicePort, eps ...model.Endpoint) model.ServicePort {
	sp.Endpoints = eps
	return sp
}

func withExternalIP(sp model.ServicePort, ip string) model.ServicePort {
	sp.ExternalIPs = append(slices.Clip(sp.ExternalIPs), fixture.IP(ip))
	return sp
}

func notReady(ep model.Endpoint) model.Endpoint {
	ep.Ready = false
	return ep
}

// Frontends and endpoints tenants share between Services: the matcher
// holds each port's frontends and serving endpoints once, however many
// ports share them (two Services naming the same 2,000 external IPs once
// made 2,000 groups of both Services' endpoints), and a flow is decided
// from either side, whichever lists fewer ports.
func TestFlowMatcherSharedByTenants(t *testing.T) {
	const frontends, endpoints = 2000, 20
	var external []netip.Addr
	for i := range frontends {
		external = append(external, netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}))
	}
	tenant := func(name string, octet byte) model.ServicePort {
		sp := fixture.Svc("tenant", name, "", inet.UDP, 53, fmt.Sprintf("10.96.1.%d", octet))
		sp.ExternalIPs = external
		for i := range endpoints {
			sp.Endpoints = append(sp.Endpoints, fixture.Ready(fmt.Sprintf("10.%d.%d.%d", octet, i>>8, i&0xff), 5353, "node-b"))
		}
		return sp
	}
	ports := []model.ServicePort{tenant("a", 1), tenant("b", 2)}
	// One endpoint listed by many Services, none of which claims the
	// shared frontends: the walk goes over the frontend's two claimants.
	for i := range 50 {
		sp := fixture.Svc("tenant", fmt.Sprintf("lister-%d", i), "", inet.UDP, 53, fmt.Sprintf("10.96.2.%d", i))
		sp.Endpoints = []model.Endpoint{fixture.Ready("10.9.9.9", 5353, "node-b")}
		ports = append(ports, sp)
	}
	p := NewPlanner(nftrules.Render)
	p.Update(&model.State{Node: fixture.Node(), Services: ports})
	m := p.FlowMatcher(ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP})
	if want := 2*endpoints + 50; len(m.serving) != want {
		t.Errorf("%d serving entries, want %d: one per port and endpoint", len(m.serving), want)
	}
	if want := 2*(frontends+1) + 50; len(m.claims) != want {
		t.Errorf("%d claims, want %d: one per port and frontend", len(m.claims), want)
	}
	ap := netip.MustParseAddrPort
	for _, tt := range []struct {
		dst, src string
		stale    bool
	}{
		{"198.51.7.207:53", "10.1.0.7:5353", false},  // a's
		{"198.51.7.207:53", "10.2.0.19:5353", false}, // b's
		{"198.51.7.207:53", "10.9.9.9:5353", true},   // the listers', who claim no external IP
		{"10.96.2.7:53", "10.9.9.9:5353", false},     // a lister's own
		{"10.96.2.7:53", "10.1.0.7:5353", true},
	} {
		if got := m.Stale(ap(tt.dst), ap(tt.src)); got != tt.stale {
			t.Errorf("entry to %s answered by %s: stale %v, want %v", tt.dst, tt.src, got, tt.stale)
		}
	}
}
