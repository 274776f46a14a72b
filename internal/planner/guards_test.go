package planner

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// settingErrors returns the *model.SettingError among errs, and fails on
// any other error.
func settingErrors(t *testing.T, errs []error) []model.SettingError {
	t.Helper()
	var out []model.SettingError
	for _, err := range errs {
		var se *model.SettingError
		if !errors.As(err, &se) {
			t.Fatalf("unexpected error %v", err)
		}
		out = append(out, *se)
	}
	return out
}

// An external IP outside the node's ExternalIPRanges gets nothing: no
// virtual server, no address on the device, no set entry; one problem
// names the port's refused addresses. Inside, and with no ranges, it is
// served as kube-proxy serves it.
func TestExternalIPRanges(t *testing.T) {
	s := fixture.Svc("tenant", "web", "", inet.TCP, 443, "10.96.0.40")
	s.ExternalIPs = fixture.IPs("203.0.113.7", "198.51.100.1", "198.51.100.2", "198.51.100.3")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.9", 8443, "node-a")}
	inside, outside := fixture.IP("203.0.113.7"), fixture.IP("198.51.100.2")
	for _, tt := range []struct {
		name    string
		ranges  []string
		refused bool
	}{
		{"no ranges", nil, false},
		{"ranges", []string{"203.0.113.0/24", "fd00:e::/64"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := fixture.Node()
			node.ExternalIPRanges = fixture.Prefixes(tt.ranges...)
			d := Build(&model.State{Node: node, Services: []model.ServicePort{s}}, nftrules.Render)
			k := d.Kernel
			if _, ok := k.Virtual[VirtualKey{Addr: inside, Port: 443, Protocol: inet.TCP}]; !ok || !k.Addresses[inside] {
				t.Errorf("%s inside the ranges is not served", inside)
			}
			_, served := k.Virtual[VirtualKey{Addr: outside, Port: 443, Protocol: inet.TCP}]
			entry := hasEntry(k.Entries[model.SetName(model.SetExternalIP, inet.IPv4)], "198.51.100.2,tcp:443")
			owned := hasEntry(k.Entries[model.SetName(model.SetOwned, inet.IPv4)], "198.51.100.2,tcp:443")
			if tt.refused == (served || k.Addresses[outside] || entry || owned) {
				t.Errorf("%s: virtual server %v, bound %v, entry %v, owned %v; want all %v", outside, served, k.Addresses[outside], entry, owned, !tt.refused)
			}
			errs := settingErrors(t, d.Errors)
			if !tt.refused {
				if len(errs) != 0 {
					t.Errorf("problems %v, want none", errs)
				}
				return
			}
			want := model.SettingError{Service: s.Name, Field: model.FieldExternalIPs, Value: "198.51.100.1 and 2 more", Reason: "outside the node's external-IP ranges (--external-ip-ranges)"}
			if len(errs) != 1 || errs[0] != want {
				t.Errorf("problems %+v, want one: %+v", errs, want)
			}
		})
	}
}

// An external IP or load-balancer address that is one of the node's own
// addresses gets no virtual server on a protected port (the kubelet's,
// an overlay's), which would take it over; on another port or protocol,
// and on an address not the node's, it is served.
func TestProtectedPorts(t *testing.T) {
	node := fixture.Node()
	node.ProtectedPorts = []model.ProtectedPort{{Protocol: inet.TCP, Port: 10250}, {Protocol: inet.UDP, Port: 8472}}
	nodeIP, other := node.Addresses[0], fixture.IP("203.0.113.8")
	svc := func(name string, proto inet.Protocol, port uint16, clusterIP string, lb bool) model.ServicePort {
		s := fixture.Svc("tenant", name, "", proto, port, clusterIP)
		if lb {
			s.LoadBalancerIPs = []netip.Addr{nodeIP, other}
		} else {
			s.ExternalIPs = []netip.Addr{nodeIP, other}
		}
		s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.9", 8443, "node-a")}
		return s
	}
	tests := []struct {
		svc     model.ServicePort
		refused bool
	}{
		{svc("kubelet", inet.TCP, 10250, "10.96.0.41", false), true},
		{svc("kubelet-lb", inet.TCP, 10250, "10.96.0.42", true), true},
		{svc("vxlan", inet.UDP, 8472, "10.96.0.43", false), true},
		{svc("vxlan-tcp", inet.TCP, 8472, "10.96.0.44", false), false},
		{svc("web", inet.TCP, 443, "10.96.0.45", true), false},
	}
	for _, tt := range tests {
		t.Run(tt.svc.Name.Name, func(t *testing.T) {
			d := Build(&model.State{Node: node, Services: []model.ServicePort{tt.svc}}, nftrules.Render)
			s := tt.svc
			if _, ok := d.Kernel.Virtual[VirtualKey{Addr: other, Port: s.Port, Protocol: s.Protocol}]; !ok {
				t.Errorf("%s, not the node's, is not served", other)
			}
			onNode := VirtualKey{Addr: nodeIP, Port: s.Port, Protocol: s.Protocol}
			if _, ok := d.Kernel.Virtual[onNode]; ok == tt.refused {
				t.Errorf("virtual server %s: %v, want %v", onNode, ok, !tt.refused)
			}
			if hasEntry(d.Kernel.Entries[model.SetName(model.SetOwned, inet.IPv4)], onNode.OwnedEntry().String()) == tt.refused {
				t.Errorf("ownership entry of %s: want %v", onNode, !tt.refused)
			}
			errs := settingErrors(t, d.Errors)
			if !tt.refused {
				if len(errs) != 0 {
					t.Errorf("problems %v, want none", errs)
				}
				return
			}
			field := model.FieldExternalIPs
			if s.LoadBalancerIPs != nil {
				field = model.FieldLoadBalancerIPs
			}
			if len(errs) != 1 || errs[0].Field != field || errs[0].Value != nodeIP.String() {
				t.Errorf("problems %+v, want one of %s naming %s", errs, field, nodeIP)
			}
		})
	}
}

// A service port naming a scheduler outside the node's AllowedSchedulers
// gets the node's, reported as an unknown scheduler is; one the list
// holds, or the node's own, it gets.
func TestAllowedSchedulers(t *testing.T) {
	node := fixture.Node()
	node.Scheduler = "wrr"
	node.AllowedSchedulers = []string{"rr", "sh"}
	for _, tt := range []struct {
		sched, want string
		refused     bool
	}{{"sh", "sh", false}, {"wrr", "wrr", false}, {"mh", "wrr", true}, {"nope", "wrr", false}} {
		t.Run(tt.sched, func(t *testing.T) {
			s := fixture.Svc("tenant", "web", "", inet.TCP, 80, "10.96.0.46")
			s.Scheduler = tt.sched
			d := Build(&model.State{Node: node, Services: []model.ServicePort{s}}, nftrules.Render)
			if got := d.Kernel.Virtual[VirtualKey{Addr: fixture.IP("10.96.0.46"), Port: 80, Protocol: inet.TCP}].Scheduler; got != tt.want {
				t.Errorf("scheduler %q, want %q", got, tt.want)
			}
			var se *model.SchedulerError
			if len(d.Errors) == 1 && errors.As(d.Errors[0], &se) {
				if got := errors.Is(se, model.ErrSchedulerNotAllowed); got != tt.refused {
					t.Errorf("%v: not allowed %v, want %v", se, got, tt.refused)
				}
			} else if tt.want != tt.sched {
				t.Errorf("errors %v, want one SchedulerError", d.Errors)
			}
		})
	}
}

// A health-check node port is the daemon's on every node address: an
// external IP or load-balancer address there naming its port loses to it,
// whatever the order the two come in, and takes it when it goes. The
// health-check port itself is no virtual server.
func TestHealthCheckNodePortKeptFromExternalIPs(t *testing.T) {
	node := fixture.Node()
	nodeIP := node.Addresses[0]
	lb := fixture.Svc("shop", "lb", "", inet.TCP, 443, "10.96.0.50")
	lb.NodePort, lb.HealthCheckNodePort, lb.ExternalPolicy = 30443, 31000, model.PolicyLocal
	lb.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.9", 8443, "node-a")}
	grab := fixture.Svc("billing", "grab", "", inet.TCP, 31000, "10.96.0.51")
	grab.ExternalIPs = []netip.Addr{nodeIP}
	grab.Endpoints = []model.Endpoint{fixture.Ready("10.244.2.9", 8080, "node-b")}
	contested := VirtualKey{Addr: nodeIP, Port: 31000, Protocol: inet.TCP}

	p := NewPlanner(nftrules.Render)
	_, errs := p.Update(&model.State{Node: node, Services: []model.ServicePort{grab}})
	if desired, _ := p.Desired(); len(errs) != 0 || desired.Virtual[contested].Scheduler == "" {
		t.Fatalf("alone, the external IP is not served: %v", errs)
	}
	_, errs = p.UpdateChanges([]model.Change{{Name: lb.Name, Port: &lb}})
	desired, owners := p.Desired()
	if _, ok := desired.Virtual[contested]; ok || owners[contested] != lb.Name {
		t.Errorf("%s: virtual server %v, owner %v; want none, held by %v", contested, ok, owners[contested], lb.Name)
	}
	var ce *ConflictError
	if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.Service != grab.Name || ce.Owner != lb.Name {
		t.Errorf("errors %v, want grab's conflict with lb", errs)
	}
	for _, ip := range node.Addresses[1:] {
		if owners[VirtualKey{Addr: ip, Port: 31000, Protocol: inet.TCP}] != lb.Name {
			t.Errorf("%s:31000 is not kept for the health check", ip)
		}
	}
	full := Build(&model.State{Node: node, Services: []model.ServicePort{lb, grab}}, nftrules.Render)
	if _, ok := full.Kernel.Virtual[contested]; ok || full.Services[contested] != lb.Name {
		t.Errorf("a full build gives %s to %v", contested, full.Services[contested])
	}
	p.UpdateChanges([]model.Change{{Name: lb.Name}})
	if desired, owners := p.Desired(); owners[contested] != grab.Name || len(desired.Reals[contested]) != 1 {
		t.Errorf("after lb left, %s is %v's with %v", contested, owners[contested], desired.Reals[contested])
	}
}

// Another program's virtual server is not taken by an external IP or a
// load-balancer address: no virtual server, entry or ownership, and a
// problem; a cluster IP still adopts one. SetForeign says when the change
// concerns what was planned, and the next Update builds again.
func TestForeignVirtualServers(t *testing.T) {
	node := fixture.Node()
	s := fixture.Svc("tenant", "vip", "", inet.TCP, 80, "10.96.0.60")
	s.ExternalIPs = fixture.IPs("203.0.113.20")
	s.LoadBalancerIPs = fixture.IPs("203.0.113.21")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.9", 8080, "node-a")}
	ext := VirtualKey{Addr: fixture.IP("203.0.113.20"), Port: 80, Protocol: inet.TCP}
	lb := VirtualKey{Addr: fixture.IP("203.0.113.21"), Port: 80, Protocol: inet.TCP}
	cluster := VirtualKey{Addr: fixture.IP("10.96.0.60"), Port: 80, Protocol: inet.TCP}
	state := &model.State{Node: node, Services: []model.ServicePort{s}}

	p := NewPlanner(nftrules.Render)
	if p.SetForeign(map[VirtualKey]bool{ext: true}) {
		t.Errorf("before any plan, SetForeign says something changed")
	}
	p.SetForeign(nil)
	p.Update(state)
	if p.SetForeign(map[VirtualKey]bool{{Addr: fixture.IP("198.51.100.1"), Port: 80, Protocol: inet.TCP}: true}) {
		t.Errorf("a virtual server no port names changed the plan")
	}
	if !p.SetForeign(map[VirtualKey]bool{ext: true, lb: true, cluster: true}) {
		t.Fatalf("SetForeign misses that the port names another program's virtual servers")
	}
	_, errs := p.Update(state)
	desired, _ := p.Desired()
	for _, vk := range []VirtualKey{ext, lb} {
		if _, ok := desired.Virtual[vk]; ok || hasEntry(desired.Entries[model.SetName(model.SetOwned, inet.IPv4)], vk.OwnedEntry().String()) {
			t.Errorf("%s, another program's, is taken", vk)
		}
	}
	if len(desired.Entries[model.SetName(model.SetExternalIP, inet.IPv4)]) != 0 || len(desired.Entries[model.SetName(model.SetLoadBalancer, inet.IPv4)]) != 0 || desired.Addresses[ext.Addr] {
		t.Errorf("entries or addresses of another program's virtual servers: %v %v %v", desired.Entries[model.SetName(model.SetExternalIP, inet.IPv4)],
			desired.Entries[model.SetName(model.SetLoadBalancer, inet.IPv4)], desired.Addresses)
	}
	if _, ok := desired.Virtual[cluster]; !ok {
		t.Errorf("the cluster IP does not adopt its virtual server")
	}
	got := settingErrors(t, errs)
	if len(got) != 2 || got[0].Field != model.FieldExternalIPs || got[0].Value != "203.0.113.20" || got[1].Field != model.FieldLoadBalancerIPs {
		t.Errorf("problems %+v, want one each for the external IP and the load-balancer address", got)
	}
	if !p.SetForeign(nil) {
		t.Fatalf("SetForeign misses that the program's virtual servers went")
	}
	p.Update(state)
	if desired, _ := p.Desired(); len(desired.Virtual) != 3 {
		t.Errorf("once the program's went, the port has %v", desired.Virtual)
	}
}
