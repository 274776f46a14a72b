package model_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// A service port is checked before it is programmed. A bad one is reported
// with the field at fault and left out; the node's other ports are still
// programmed.
func ExampleServicePort_Validate() {
	dns := model.ServicePort{
		Name:       model.ServicePortName{Namespace: "kube-system", Name: "kube-dns", Port: "dns"},
		Protocol:   inet.UDP,
		Port:       53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Endpoints: []model.Endpoint{
			{Addr: netip.MustParseAddr("10.244.1.5"), Port: 53, Ready: true},
			{Addr: netip.MustParseAddr("10.244.1.6"), Port: 0, Ready: true},
		},
	}
	err := dns.Validate()
	fmt.Println(err)
	var fe *model.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Service, fe.Field, errors.Is(err, model.ErrInvalid))
	}
	// Output:
	// service kube-system/kube-dns:dns: field endpoints[1].port: must be 1-65535
	// kube-system/kube-dns:dns endpoints[1].port true
}

// A Service may ask for its own scheduler. One the kernel lacks gives the
// node's scheduler instead, with an error to report: a service is never
// left out for its scheduler.
func ExampleNode_Scheduling() {
	node := model.Node{Name: "node-a", Scheduler: "wrr"}
	web := model.ServicePort{
		Name:           model.ServicePortName{Namespace: "default", Name: "web"},
		Scheduler:      "mh",
		SchedulerFlags: model.MHPort | model.SHFallback,
	}

	// The kernel has mh: the port gets it, with the flags mh reads.
	choice, problems := node.Scheduling(&web, nil)
	fmt.Println(choice.Name, choice.Flags.Named(choice.Name))
	for _, p := range problems {
		fmt.Println(p)
	}

	// The kernel lacks mh (the dataplane learns which it lacks).
	lacking := map[string]error{"mh": errors.New("ip_vs_mh is not loaded")}
	choice, problems = node.Scheduling(&web, lacking)
	fmt.Println(choice.Name)
	for _, p := range problems {
		fmt.Println(p)
	}
	// Output:
	// mh mh-port
	// service default/web: schedulerFlags "sh-fallback" is ignored: the mh scheduler does not read them
	// wrr
	// service default/web: scheduler "mh": ip_vs_mh is not loaded; it uses the node's scheduler wrr
}

// The ipsets kube-proxy's rules match against have one name per family,
// cut to the kernel's 31 characters as kube-proxy cuts them.
func ExampleSetName() {
	fmt.Println(model.SetName(model.SetLoadBalancerSourceNet, inet.IPv4))
	fmt.Println(model.SetName(model.SetLoadBalancerSourceNet, inet.IPv6))
	// Output:
	// KUBE-LOAD-BALANCER-SOURCE-CIDR
	// KUBE-6-LOAD-BALANCER-SOURCE-CID
}

// The kernel settings a node needs follow from its settings alone.
func ExampleNode_Sysctls() {
	node := model.Node{StrictARP: true}
	for _, s := range node.Sysctls() {
		fmt.Println(s.Name, s.Value)
	}
	// Output:
	// net/ipv4/vs/conntrack 1
	// net/ipv4/vs/expire_nodest_conn 1
	// net/ipv4/vs/expire_quiescent_template 1
	// net/ipv4/ip_forward 1
	// net/ipv4/conf/all/arp_ignore 1
	// net/ipv4/conf/all/arp_announce 2
}
