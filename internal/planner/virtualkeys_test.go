package planner

import (
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// VirtualKeys lists what a sync programs for the port: every family of
// its cluster IPs, its external and load-balancer addresses in the
// families it serves, and its node port on each node address.
func TestVirtualKeys(t *testing.T) {
	node := fixture.Node()
	s := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.20", "fd00:96::20")
	s.NodePort = 30080
	// The health-check node port is the daemon's: no virtual server.
	s.HealthCheckNodePort, s.ExternalPolicy = 31000, model.PolicyLocal
	s.ExternalIPs = fixture.IPs("203.0.113.5")
	s.LoadBalancerIPs = fixture.IPs("2001:db8::10")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.5", 8080, "node-a")}
	got := VirtualKeys(&node, &s)
	want := []VirtualKey{
		{Addr: fixture.IP("10.96.0.20"), Port: 80, Protocol: inet.TCP},
		{Addr: fixture.IP("fd00:96::20"), Port: 80, Protocol: inet.TCP},
		{Addr: fixture.IP("203.0.113.5"), Port: 80, Protocol: inet.TCP},
		{Addr: fixture.IP("2001:db8::10"), Port: 80, Protocol: inet.TCP},
		{Addr: fixture.IP("192.168.0.10"), Port: 30080, Protocol: inet.TCP},
		{Addr: fixture.IP("fd00:1::10"), Port: 30080, Protocol: inet.TCP},
	}
	slices.SortFunc(got, VirtualKey.compare)
	slices.SortFunc(want, VirtualKey.compare)
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	// The same keys as the whole build programs.
	d := Build(&model.State{Node: node, Services: []model.ServicePort{s}}, nftrules.Render)
	for _, k := range want {
		if _, ok := d.Kernel.Virtual[k]; !ok {
			t.Errorf("%v is listed but not built", k)
		}
	}
	if len(d.Kernel.Virtual) != len(want) {
		t.Errorf("built %d virtual servers, listed %d", len(d.Kernel.Virtual), len(want))
	}
	s.Port = 0
	if keys := VirtualKeys(&node, &s); keys != nil {
		t.Errorf("an invalid port has virtual servers %v", keys)
	}
}
