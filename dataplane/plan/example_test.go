package plan_test

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Diff plans what turns one kernel state into another: here an empty
// node into a model's desired state, then that node, once the plan is
// applied, into the state of the model after a new endpoint, which adds
// its real servers on each of the service's virtual servers.
func ExampleDiff() {
	node := model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}
	web := model.ServicePort{
		Name:       model.ServicePortName{Namespace: "default", Name: "web"},
		Protocol:   inet.TCP,
		Port:       80,
		NodePort:   30080,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
		Endpoints:  []model.Endpoint{{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Ready: true}},
	}
	kernel := plan.NewKernelState() // an empty node
	first := plan.Diff(kernel, plan.Build(&model.State{Node: node, Services: []model.ServicePort{web}}, nftrules.Render))
	fmt.Println("first sync:", first.Len(), "operations")
	kernel.Record(slices.Collect(first.All())...) // what applying them leaves

	web.Endpoints = []model.Endpoint{web.Endpoints[0], {Addr: netip.MustParseAddr("10.244.2.7"), Port: 8080, Ready: true}}
	fmt.Print(plan.Diff(kernel, plan.Build(&model.State{Node: node, Services: []model.ServicePort{web}}, nftrules.Render)))
	// Output:
	// first sync: 46 operations
	// ipvs add TCP 10.96.0.20:80 -> 10.244.2.7:8080 weight 1
	// ipvs add TCP 192.168.0.10:30080 -> 10.244.2.7:8080 weight 1
}

// Build computes the desired kernel state of a whole model. A service
// port that fails validation is left out and reported; the others are
// programmed.
func ExampleBuild() {
	state := &model.State{
		Node: model.Node{Name: "node-a"},
		Services: []model.ServicePort{{
			Name:       model.ServicePortName{Namespace: "default", Name: "web"},
			Protocol:   inet.TCP,
			Port:       80,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
		}, {
			Name:       model.ServicePortName{Namespace: "default", Name: "broken"},
			Protocol:   inet.TCP,
			Port:       0,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.21")},
		}},
	}
	desired := plan.Build(state, nftrules.Render)
	for vk, name := range desired.Services { // one virtual server here
		fmt.Println(vk, name)
	}
	for _, err := range desired.Errors {
		fmt.Println(err)
	}
	// Output:
	// TCP 10.96.0.20:80 default/web
	// service default/broken: field port: must be 1-65535
}
