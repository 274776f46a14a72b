package planner_test

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// A Planner keeps the desired state between syncs: the first sync plans
// everything, and a later change to one service plans that service alone,
// here the real servers of a new endpoint on each of its virtual servers.
func ExamplePlanner() {
	node := model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}
	web := model.ServicePort{
		Name:       model.ServicePortName{Namespace: "default", Name: "web"},
		Protocol:   inet.TCP,
		Port:       80,
		NodePort:   30080,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
		Endpoints:  []model.Endpoint{{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Ready: true}},
	}
	p := planner.NewPlanner(nftrules.Render)

	scope, _ := p.Update(&model.State{Node: node, Services: []model.ServicePort{web}})
	desired, services := p.Desired()
	kernel := planner.NewKernelState() // an empty node
	first := planner.Diff(planner.DiffInputs{Observed: kernel, Desired: desired, Services: services, Scope: scope})
	fmt.Println("first sync:", first.Len(), "operations")
	kernel.Record(slices.Collect(first.All())...) // what applying them leaves

	web.Endpoints = []model.Endpoint{web.Endpoints[0], {Addr: netip.MustParseAddr("10.244.2.7"), Port: 8080, Ready: true}}
	scope, _ = p.UpdateChanges([]model.Change{{Name: web.Name, Port: &web}})
	desired, services = p.Desired()
	fmt.Print(planner.Diff(planner.DiffInputs{Observed: kernel, Desired: desired, Services: services, Scope: scope}))
	// Output:
	// first sync: 46 operations
	// ipvs add TCP 10.96.0.20:80 -> 10.244.2.7:8080 weight 1
	// ipvs add TCP 192.168.0.10:30080 -> 10.244.2.7:8080 weight 1
}
