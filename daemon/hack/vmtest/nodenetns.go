package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/ipvsplane/ipvsplane/daemon/internal/controlplane"
)

// tapName is the node's link in the namespace; qemu attaches to it.
const tapName = "tap0"

// runInNodeNetns makes the node's network namespace, runs vmtest -node
// args in it and removes it. The namespace has loopback and the tap
// device, with routes to the node for its pods, the services and the load
// balancers of both families, and no other route: no default route, no
// forwarding.
func runInNodeNetns(args []string) (int, error) {
	ns := "ipvsplane-node-" + strconv.Itoa(os.Getpid())
	setup := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "tuntap", "add", "dev", tapName, "mode", "tap"},
		{"-n", ns, "addr", "add", controlplane.ClusterHostAddr + "/24", "dev", tapName},
		{"-n", ns, "link", "set", tapName, "up"},
		{"-n", ns, "route", "add", controlplane.ClusterCIDR, "via", nodeIP},
		{"-n", ns, "route", "add", controlplane.ServiceCIDR, "via", nodeIP},
		{"-n", ns, "route", "add", loadBalancerCIDR, "via", nodeIP},
		{"-n", ns, "addr", "add", hostIP6 + "/64", "dev", tapName, "nodad"},
		{"-n", ns, "route", "add", controlplane.ClusterCIDR6, "via", nodeIP6},
		{"-n", ns, "route", "add", controlplane.ServiceCIDR6, "via", nodeIP6},
		{"-n", ns, "route", "add", loadBalancerCIDR6, "via", nodeIP6},
	}
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	for _, a := range setup {
		if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("the node's network namespace: ip %v: %v: %s (root and iproute2 needed)", a, err, out)
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
