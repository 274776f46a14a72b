package status

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
)

func TestNamesOfKeys(t *testing.T) {
	sp := model.ServicePort{
		Name: model.ServicePortName{Namespace: "demo", Name: "dns", Port: "dns"}, Protocol: inet.UDP, Port: 53,
		ClusterIPs:      []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")},
		ExternalIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("2001:db8::1")},
		NodePort:        30053,
	}
	want := []string{"UDP 10.96.0.10:53", "UDP [fd00::a]:53", "UDP 192.0.2.1:53", "UDP [2001:db8::1]:53", "UDP *:30053"}
	if got := NamesOf(&sp).Keys; !slices.Equal(got, want) {
		t.Errorf("NamesOf(...).Keys = %q, want %q", got, want)
	}
	// The names the status command looks up are the ones it wrote.
	ports := map[model.ServicePortName]PortNames{}
	names := ServiceNames([]model.ServicePort{sp}, ports, noOwner)
	for _, k := range want {
		if names[k] != "demo/dns:dns" {
			t.Errorf("%s names %q", k, names[k])
		}
	}
	if !slices.Equal(ports[sp.Name].Keys, want) || len(names) != len(want) {
		t.Errorf("ports %q, names %v", ports[sp.Name], names)
	}
	if got := inet.VirtualServer(sp.Protocol, sp.ClusterIPs[1], sp.Port); got != want[1] {
		t.Errorf("the lookup's key %q differs from the written %q", got, want[1])
	}
	if got := inet.VirtualServer(sp.Protocol, netip.Addr{}, sp.NodePort); got != want[4] {
		t.Errorf("the lookup's node-port key %q differs from the written %q", got, want[4])
	}
}

// TestLegacyNamesRead: a names file v0.1.0-rc.1 wrote reads as one in
// today's form, so status names the old daemon's virtual servers during
// an upgrade.
func TestLegacyNamesRead(t *testing.T) {
	legacy := `{"tcp/10.96.0.1:443":"default/kubernetes:https","udp/[fd00::a]:53":"kube-system/kube-dns:dns","tcp/*:30080":"demo/web:http","TCP 10.96.0.2:80":"demo/new:http","odd/key":"x"}`
	rec, err := parseRecord("state.json", []byte(`{"node":"n1"}`), []byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"TCP 10.96.0.1:443": "default/kubernetes:https",
		"UDP [fd00::a]:53":  "kube-system/kube-dns:dns",
		"TCP *:30080":       "demo/web:http",
		"TCP 10.96.0.2:80":  "demo/new:http",
		"odd/key":           "x",
	}
	if fmt.Sprint(rec.Services) != fmt.Sprint(want) {
		t.Errorf("names read %v, want %v", rec.Services, want)
	}
}

// noOwner is a planner's that programs no virtual server.
func noOwner(plan.VirtualKey) (model.ServicePortName, bool) { return model.ServicePortName{}, false }

// A virtual server two ports claim names the one the planner programs it
// for, whichever came last, as a whole or as changes; when the owner
// goes, the other takes its name.
func TestServiceNamesContested(t *testing.T) {
	dns := model.ServicePort{Name: model.ServicePortName{Namespace: "kube-system", Name: "kube-dns", Port: "dns"}, Protocol: inet.UDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	squat := model.ServicePort{Name: model.ServicePortName{Namespace: "tenant", Name: "squat", Port: "dns"}, Protocol: inet.UDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.99")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	contested := plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 53, Protocol: inet.UDP}
	owner := dns.Name
	byPlanner := func(vk plan.VirtualKey) (model.ServicePortName, bool) {
		if vk == contested {
			return owner, owner != model.ServicePortName{}
		}
		return model.ServicePortName{}, false
	}
	ports := map[model.ServicePortName]PortNames{}
	names := ServiceNames([]model.ServicePort{dns, squat}, ports, byPlanner)
	if got := names["UDP 10.96.0.10:53"]; got != "kube-system/kube-dns:dns" {
		t.Errorf("the whole state names %q", got)
	}
	if got := names["UDP 10.96.0.99:53"]; got != "tenant/squat:dns" {
		t.Errorf("the tenant's own cluster IP names %q", got)
	}
	Rename(names, squat.Name, ports[squat.Name], NamesOf(&squat), byPlanner)
	if got := names["UDP 10.96.0.10:53"]; got != "kube-system/kube-dns:dns" {
		t.Errorf("after the tenant's change: %q", got)
	}
	owner = squat.Name
	Rename(names, dns.Name, ports[dns.Name], PortNames{}, byPlanner)
	if got := names["UDP 10.96.0.10:53"]; got != "tenant/squat:dns" {
		t.Errorf("once kube-dns went: %q", got)
	}
	owner = model.ServicePortName{}
	Rename(names, squat.Name, ports[squat.Name], PortNames{}, byPlanner)
	if len(names) != 0 {
		t.Errorf("once both went: %v", names)
	}
}

// BenchmarkServiceNames names 10,000 service ports, as the daemon does at
// its first sync.
func BenchmarkServiceNames(b *testing.B) {
	services := make([]model.ServicePort, 10000)
	for i := range services {
		services[i] = model.ServicePort{
			Name:     model.ServicePortName{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i), Port: "http"},
			Protocol: inet.TCP, Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
		}
		if i%10 == 0 {
			services[i].NodePort = uint16(30000 + i/10)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ServiceNames(services, map[model.ServicePortName]PortNames{}, noOwner)
	}
}
