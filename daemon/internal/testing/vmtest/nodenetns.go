package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// vmTapName is the i-th node's link in the namespace (from 0); its qemu
// attaches to it.
func vmTapName(i int) string { return "tap" + strconv.Itoa(i) }

// bridgeName is the namespace's bridge of the nodes' tap devices when
// there is more than one node.
const bridgeName = "br0"

// runInNodeNetns makes the nodes' network namespace, runs vmtest -node
// args in it and removes it. The namespace has loopback and the tap
// device, with routes to the node for its pods, the services and the load
// balancers of both families, and no other route: no default route, no
// forwarding.
//
// With more than one node the tap devices are ports of one bridge, which
// holds the namespace's addresses: one L2 for the nodes and the
// namespace, with nothing of the host's on it. (qemu's socket networking
// would join the guests to each other, but the namespace's control plane
// and the command must reach every node too, which one bridge gives
// without a second network card per guest.) The namespace then forwards,
// the router between the nodes' pod ranges: each node's default route
// leads to it, and waitVMReady routes each node's pod ranges to that
// node as the controller manager gives them. The services and load
// balancers stay routed to the first node.
func runInNodeNetns(args []string, nodes int) (int, error) {
	ns := "ipvsplane-node-" + strconv.Itoa(os.Getpid())
	setup := nodeNetnsSetup(ns, nodes)
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	for _, a := range setup {
		if err := runIP(a...); err != nil {
			return 0, fmt.Errorf("the node's network namespace: %w (root and iproute2 needed)", err)
		}
	}
	self, err := selfPath()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, self, nodeFlag}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"="+ns)
	return runForStatus(cmd)
}

// nodeNetnsSetup is the ip commands that make the namespace ns for nodes
// nodes.
func nodeNetnsSetup(ns string, nodes int) [][]string {
	ip := func(args ...string) []string { return append([]string{"-n", ns}, args...) }
	setup := [][]string{{"netns", "add", ns}, ip("link", "set", "lo", "up")}
	link := vmTapName(0)
	if nodes > 1 {
		link = bridgeName
		setup = append(setup, ip("link", "add", bridgeName, "type", "bridge", "forward_delay", "0", "mcast_snooping", "0"))
		for i := range nodes {
			setup = append(setup,
				ip("tuntap", "add", "dev", vmTapName(i), "mode", "tap"),
				ip("link", "set", vmTapName(i), "master", bridgeName, "up"))
		}
	} else {
		setup = append(setup, ip("tuntap", "add", "dev", link, "mode", "tap"))
	}
	// One node takes the whole pod ranges; several, each its own
	// (routePodCIDRs).
	podRoute, podRoute6 := ip("route", "add", controlplane.ClusterCIDR, "via", nodeIP), ip("route", "add", controlplane.ClusterCIDR6, "via", nodeIP6)
	if nodes > 1 {
		podRoute, podRoute6 = nil, nil
	}
	setup = append(setup,
		ip("addr", "add", controlplane.ClusterHostAddr+"/24", "dev", link),
		ip("link", "set", link, "up"),
		podRoute,
		ip("route", "add", controlplane.ServiceCIDR, "via", nodeIP),
		ip("route", "add", loadBalancerCIDR, "via", nodeIP),
		ip("addr", "add", hostIP6+"/64", "dev", link, "nodad"),
		podRoute6,
		ip("route", "add", controlplane.ServiceCIDR6, "via", nodeIP6),
		ip("route", "add", loadBalancerCIDR6, "via", nodeIP6),
		// The load balancers' client (loadBalancer).
		ip("addr", "add", loadBalancerClient.String()+"/32", "dev", "lo"),
		ip("addr", "add", loadBalancerClient6.String()+"/128", "dev", "lo", "nodad"))
	if nodes > 1 {
		sysctls := append([]string{"netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"}, loadBalancerSysctls...)
		setup = append(setup, sysctls)
	}
	return slices.DeleteFunc(setup, func(a []string) bool { return a == nil })
}

// routePodCIDRs routes a node's pod ranges to it in the namespace, where
// vmtest -node runs.
func routePodCIDRs(vm *nodeVM, cidrs []string) error {
	for _, cidr := range cidrs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("node %s's pod range: %w", vm.name, err)
		}
		via := vm.ip
		if p.Addr().Is6() {
			via = vm.ip6
		}
		if err := runIP("route", "replace", p.String(), "via", via.String()); err != nil {
			return fmt.Errorf("routing node %s's pod range %s: %w", vm.name, p, err)
		}
	}
	vm.podCIDRs = cidrs
	return nil
}

// runIP runs ip with args; the error holds the command and what ip said.
func runIP(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
