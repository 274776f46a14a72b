package dataplane_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Plans a NodePort service on an empty node and prints the operations, as
// a dry run does (the ipset creations are left out here).
func Example() {
	state := &model.State{
		Node: model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}},
		Services: []model.ServicePort{{
			Name:       model.ServicePortName{Namespace: "default", Name: "web"},
			Protocol:   inet.TCP,
			Port:       80,
			NodePort:   30080,
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
			Endpoints: []model.Endpoint{
				{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Ready: true, NodeName: "node-b"},
			},
		}},
	}
	desired := plan.Build(state, nftrules.Render)
	plan := plan.Diff(plan.NewKernelState(), desired)
	for op := range plan.All() {
		if !strings.HasPrefix(op.String(), "ipset create") {
			fmt.Println(op)
		}
	}
	// Output:
	// ipset add KUBE-CLUSTER-IP 10.96.0.20,tcp:80
	// ipset add KUBE-IPVS-IPS 10.96.0.20
	// ipset add KUBE-IPVSPLANE-OWNED 10.96.0.20,tcp:80 192.168.0.10,tcp:30080
	// ipset add KUBE-NODE-PORT-TCP 30080
	// rules replace (166 lines)
	// ipvs add TCP 10.96.0.20:80 rr (default/web)
	// ipvs add TCP 192.168.0.10:30080 rr (default/web)
	// ipvs add TCP 10.96.0.20:80 -> 10.244.1.5:8080 weight 1
	// ipvs add TCP 192.168.0.10:30080 -> 10.244.1.5:8080 weight 1
	// addr bind 10.96.0.20
}
