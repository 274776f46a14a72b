package nftrules_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
)

// Render prints the tables a node's settings call for, without a kernel:
// here the chain that catches service traffic in the ip table. The rules
// match the KUBE-* ipsets, so they are the same for one service or fifty
// thousand; traffic to a cluster IP from outside the pods' range is marked
// for masquerade.
func ExampleRender() {
	node := &model.Node{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	in := false
	for line := range strings.Lines(nftrules.Render(node)) {
		in = in || line == "  chain KUBE-SERVICES {\n"
		if in {
			fmt.Print(line)
		}
		if in && line == "  }\n" {
			return
		}
	}
	// Output:
	//   chain KUBE-SERVICES {
	//     saddr loopback return
	//     set KUBE-LOAD-BALANCER dst,dst jump KUBE-LOAD-BALANCER
	//     set KUBE-CLUSTER-IP dst,dst saddr != 10.244.0.0/16 jump KUBE-MARK-MASQ
	//     set KUBE-EXTERNAL-IP dst,dst jump KUBE-MARK-MASQ
	//     set KUBE-EXTERNAL-IP dst,dst daddr type local dnat to daddr
	//     set KUBE-EXTERNAL-IP-LOCAL dst,dst daddr type local dnat to daddr
	//     daddr type local jump KUBE-NODE-PORT
	//     set KUBE-CLUSTER-IP dst,dst daddr type local dnat to daddr
	//     set KUBE-LOAD-BALANCER dst,dst daddr type local dnat to daddr
	//   }
}

// The tables change only with the node's settings: a plan replaces them
// when Render's text changes, and leaves them alone otherwise.
func ExampleRender_settings() {
	node := model.Node{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	before := nftrules.Render(&node)

	node.StrictARP = true // a sysctl, not a rule
	fmt.Println(nftrules.Render(&node) == before)

	node.MasqueradeAll = true
	fmt.Println(nftrules.Render(&node) == before)
	// Output:
	// true
	// false
}
