package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// nodeFlag makes vmtest boot a Kubernetes cluster of one node (or -nodes
// N) and run a host command against it, instead of running a test binary
// in the guest:
//
//	vmtest -node [-nodes N] [-load-balancers] [-proxy ipvsplane|kube-proxy|kubeadm|none] [-image TAR -image-ref REF] -- COMMAND [ARGS...]
//
// Everything runs in a network namespace vmtest makes (and removes after)
// whose only link is a tap device to the VM (with -nodes N, a bridge of
// one tap device per VM, see runInNodeNetns): the control plane
// (internal/controlplane with Cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) at controlplane.ClusterHostAddr,
// qemu, and COMMAND. The cluster is dual-stack, IPv4 first. The namespace
// routes the node's pod ranges, the service ranges and the load balancer
// ranges of both families to the node and nothing anywhere else, so the API server reaches pods and kubelet as in a real cluster,
// COMMAND is a client outside the node, and nothing the node sends leaves
// the namespace. Each node boots from an ext4 disk built from Debian 12's
// containerd, runc and CNI plugins (hack/fetch-node-packages), the kubelet
// and the images of hack/build-images. Once it is Ready, the proxy
// (ipvsplane from deploy/ with `kubectl apply -k`, only the image and the
// API server's address set by an overlay, kube-proxy in IPVS mode, or
// kube-proxy as the pinned kubeadm installs it, kubeadm-config beside it) and
// CoreDNS are installed and awaited. COMMAND then runs with KUBECONFIG
// naming the admin kubeconfig and the variables env lists; vmtest exits
// with its status after stopping everything.
const nodeFlag = "-node"

// Facts of the (first) node the command's tests rely on; the others
// follow it: kubenode2 at 10.0.2.16 and fd00:10:2::16, and so on.
const (
	nodeName = "kubenode"
	nodeIP   = "10.0.2.15"
	nodeIP6  = "fd00:10:2::15"
	hostIP6  = "fd00:10:2::2" // the namespace's end of the link
	// maxNodes bounds -nodes: the addresses stay below the /24's and
	// the MAC addresses' last byte stays a hex pair.
	maxNodes = 9
	// loadBalancerCIDR and loadBalancerCIDR6 are where tests pick load
	// balancers' addresses (documentation ranges): the namespace routes
	// them to the node.
	loadBalancerCIDR  = "192.0.2.0/24"
	loadBalancerCIDR6 = "2001:db8::/64"
	// netnsEnv names the namespace vmtest -node runs itself in.
	netnsEnv = "IPVSPLANE_NODE_NETNS"
)

// nodeConfig is one node run's settings.
type nodeConfig struct {
	proxy string // ipvsplane, kube-proxy, kubeadm or none
	// kubeProxyMode is kube-proxy's mode, when it is the proxy: ipvs,
	// iptables or nftables.
	kubeProxyMode string
	image         string // the ipvsplane image's OCI archive
	imageRef      string // its reference
	deploy        string // the manifests' directory, deploy/
	install       string // how ipvsplane is installed: kubectl (apply -k) or helm
	chart         string // the Helm chart's directory, charts/ipvsplane
	nodes         int    // how many node VMs
	loadBalancers bool   // vmtest is the cluster's load balancer (loadBalancer)
	mem           int    // each VM's memory
	command       []string
}

func parseNodeArgs(args []string) (nodeConfig, error) {
	c := nodeConfig{}
	fs := flag.NewFlagSet("vmtest "+nodeFlag, flag.ContinueOnError)
	fs.StringVar(&c.proxy, "proxy", "ipvsplane", "the node's proxy: ipvsplane, kube-proxy, kubeadm (kube-proxy as kubeadm installs it) or none")
	fs.StringVar(&c.kubeProxyMode, "kube-proxy-mode", "ipvs", "kube-proxy's mode with -proxy kube-proxy: ipvs, iptables or nftables")
	fs.StringVar(&c.image, "image", "", "the ipvsplane image's OCI archive (make image)")
	fs.StringVar(&c.imageRef, "image-ref", "", "the ipvsplane image's reference")
	fs.StringVar(&c.deploy, "deploy", "deploy", "the directory of ipvsplane's manifests")
	fs.StringVar(&c.install, "install", "kubectl", "how ipvsplane is installed: kubectl (apply -k over -deploy) or helm (install -chart)")
	fs.StringVar(&c.chart, "chart", "charts/ipvsplane", "the directory of ipvsplane's Helm chart")
	fs.IntVar(&c.nodes, "nodes", 1, "how many nodes: one VM each")
	fs.BoolVar(&c.loadBalancers, "load-balancers", false, "serve Services of type LoadBalancer as a cloud would: an address in their status, routed to the nodes that pass its health checks")
	fs.IntVar(&c.mem, "mem", envInt("VMTEST_MEM", 3072), "each guest's memory in MiB")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.command = fs.Args()
	if len(c.command) == 0 {
		return c, errors.New("no command: vmtest -node [flags] -- COMMAND [ARGS...]")
	}
	if c.nodes < 1 || c.nodes > maxNodes {
		return c, fmt.Errorf("-nodes %d: want 1 to %d", c.nodes, maxNodes)
	}
	switch c.proxy {
	case "ipvsplane", "kube-proxy", "kubeadm", "none":
	default:
		return c, fmt.Errorf("-proxy %q: want ipvsplane, kube-proxy, kubeadm or none", c.proxy)
	}
	switch c.kubeProxyMode {
	case "ipvs", "iptables", "nftables":
	default:
		return c, fmt.Errorf("-kube-proxy-mode %q: want ipvs, iptables or nftables", c.kubeProxyMode)
	}
	if c.install != "kubectl" && c.install != "helm" {
		return c, fmt.Errorf("-install %q: want kubectl or helm", c.install)
	}
	if c.proxy == "ipvsplane" && (c.image == "" || c.imageRef == "") {
		return c, errors.New("-proxy ipvsplane needs -image and -image-ref (make image)")
	}
	return c, nil
}

// runNode is vmtest -node: outside the node's namespace, it makes the
// namespace and runs itself in it.
func runNode(args []string) int {
	c, err := parseNodeArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: %v\n", err)
		return 2
	}
	var status int
	if os.Getenv(netnsEnv) == "" {
		status, err = runInNodeNetns(args, c.nodes)
	} else {
		status, err = c.run()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: node: %v\n", err)
		return 1
	}
	return status
}

// run boots the cluster and runs the command. A node that is not Ready in
// time, or whose guest stops first, fails the boot; the whole cluster
// (control plane, disk, every node) is then booted once more: under
// emulation a guest may hang (a soft lockup right after the kubelet
// started was seen once in five two-node boots), which a second boot does
// not repeat, and the tests stay as strict as they are.
func (c nodeConfig) run() (int, error) {
	kernelDir, release, err := findKernel()
	if err != nil {
		return 0, err
	}
	status, err := c.runCluster(kernelDir, release)
	var stuck *notReadyError
	if errors.As(err, &stuck) {
		fmt.Fprintf(os.Stderr, "vmtest: node: %v\nvmtest: node: booting the whole cluster again, once\n", err)
		status, err = c.runCluster(kernelDir, release)
	}
	return status, err
}

// runCluster is one boot of the cluster and the command's run in it.
func (c nodeConfig) runCluster(kernelDir, release string) (int, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), controlplane.StartTimeout)
	cp, err := controlplane.Start(ctx, &controlplane.Config{Cluster: true})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("control plane: %w", err)
	}
	defer cp.Close()
	work, err := os.MkdirTemp("", "vmtest-node-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	n := &node{config: c, cp: cp, work: work, kernelDir: kernelDir, release: release}
	if n.vms, err = newNodeVMs(c.nodes, work); err != nil {
		return 0, err
	}
	if err := n.buildDisk(); err != nil {
		return 0, fmt.Errorf("building the node's disk: %w", err)
	}
	built := time.Now()
	defer n.stop()
	if err := n.boot(); err != nil {
		return 0, err
	}
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := n.waitReady(ctx); err != nil {
		return 0, n.withLogs(err)
	}
	ready := time.Now()
	if err := n.installAddons(ctx); err != nil {
		return 0, n.withLogs(err)
	}
	if c.loadBalancers {
		stop, err := n.startLoadBalancer()
		if err != nil {
			return 0, err
		}
		defer stop()
	}
	fmt.Fprintf(os.Stderr, "vmtest: node %s on %s: disk %v, node Ready %v after boot, %s and CoreDNS Ready %v later; qemu resident: %s\n",
		n.names(), release, built.Sub(start).Round(100*time.Millisecond), ready.Sub(built).Round(100*time.Millisecond),
		c.proxy, time.Since(ready).Round(100*time.Millisecond), n.residentMemory())
	return n.runCommand()
}

// runCommand runs the command on the host with the cluster's variables and
// returns its exit status.
func (n *node) runCommand() (int, error) {
	cmd := exec.Command(n.config.command[0], n.config.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), n.env()...)
	// The command ends with vmtest, as the guests do (bootVM).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	status, err := runForStatus(cmd)
	if err == nil && status != 0 {
		fmt.Fprintf(os.Stderr, "vmtest: node: %s exited with status %d; the node's last log lines:\n%s\n",
			filepath.Base(n.config.command[0]), status, n.logTail(40))
	}
	return status, err
}

// runForStatus runs cmd and returns its exit status; the error is for a
// command that could not run or was killed by a signal.
func runForStatus(cmd *exec.Cmd) (int, error) {
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() >= 0 {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// Variables the command gets besides KUBECONFIG.
const (
	nodeNameEnv    = "IPVSPLANE_NODE_NAME"            // the node's name
	nodeIPEnv      = "IPVSPLANE_NODE_IP"              // its IPv4 address, which the command reaches
	nodeIP6Env     = "IPVSPLANE_NODE_IP6"             // its IPv6 address
	nodeLBEnv      = "IPVSPLANE_NODE_LB_CIDR"         // where load balancers' IPv4 addresses may be picked, routed to the node
	nodeLB6Env     = "IPVSPLANE_NODE_LB_CIDR6"        // the same for IPv6
	nodeProxyEnv   = "IPVSPLANE_NODE_PROXY"           // ipvsplane, kube-proxy, kubeadm or none
	nodeKPModeEnv  = "IPVSPLANE_NODE_KUBE_PROXY_MODE" // kube-proxy's mode when it is the proxy
	nodeInstallEnv = "IPVSPLANE_NODE_INSTALL"         // how ipvsplane was installed: kubectl or helm
	nodeLogEnv     = "IPVSPLANE_NODE_LOG"             // containerd's and the kubelet's log as it streams
	nodeOverlayEnv = "IPVSPLANE_NODE_OVERLAY"         // the kustomization that installs ipvsplane from deploy/
	nodeImageEnv   = "IPVSPLANE_NODE_IMAGE"           // the ipvsplane image's reference
	nodeLBsEnv     = "IPVSPLANE_NODE_LOAD_BALANCERS"  // set when vmtest is the cluster's load balancer (-load-balancers)
)

func (n *node) env() []string {
	env := []string{
		"KUBECONFIG=" + n.kubeconfig,
		nodeNameEnv + "=" + nodeName,
		nodeIPEnv + "=" + nodeIP,
		nodeIP6Env + "=" + nodeIP6,
		nodeLBEnv + "=" + loadBalancerCIDR,
		nodeLB6Env + "=" + loadBalancerCIDR6,
		nodeProxyEnv + "=" + n.config.proxy,
		nodeKPModeEnv + "=" + n.config.kubeProxyMode,
		nodeInstallEnv + "=" + n.config.install,
		nodeLogEnv + "=" + n.vms[0].logFile,
		nodeOverlayEnv + "=" + n.overlay,
		nodeImageEnv + "=" + n.config.imageRef,
	}
	if n.config.loadBalancers {
		env = append(env, nodeLBsEnv+"=1")
	}
	return env
}
