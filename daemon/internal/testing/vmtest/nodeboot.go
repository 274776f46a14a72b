package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// nodeVM is one node's VM: its name and addresses, its link in the
// namespace and what it logs.
type nodeVM struct {
	name     string
	ip, ip6  netip.Addr
	tap      string     // its tap device in the namespace
	mac      string     // its network card's, distinct on the shared link
	dir      string     // its files: console and logs
	console  string     // the guest's console, a file
	logFile  string     // containerd's and the kubelet's logs, streamed by the guest
	files    guestFiles // its heartbeat's file and qemu's QMP socket
	qemu     *testutil.Proc
	podCIDRs []string // the controller manager's, once it gave them
}

// newNodeVMs describes count nodes: kubenode at nodeIP and nodeIP6 on tap0,
// then kubenode2 at the next addresses on tap1, and so on.
func newNodeVMs(count int, work string) ([]*nodeVM, error) {
	ip, ip6 := netip.MustParseAddr(nodeIP), netip.MustParseAddr(nodeIP6)
	vms := make([]*nodeVM, count)
	for i := range vms {
		vm := &nodeVM{name: nodeName, ip: ip, ip6: ip6, tap: vmTapName(i), dir: filepath.Join(work, "vm"+strconv.Itoa(i))}
		if i > 0 {
			vm.name += strconv.Itoa(i + 1)
		}
		// qemu's default MAC address is 52:54:00:12:34:56 for every VM.
		vm.mac = fmt.Sprintf("52:54:00:12:34:%02x", 0x56+i)
		vm.console = filepath.Join(vm.dir, "console.log")
		vm.logFile = filepath.Join(vm.dir, "node.log")
		vm.files = guestFiles{heartbeat: filepath.Join(vm.dir, "heartbeat"), qmp: filepath.Join(vm.dir, "qmp")}
		if err := os.MkdirAll(vm.dir, 0o755); err != nil {
			return nil, err
		}
		vms[i] = vm
		ip, ip6 = ip.Next(), ip6.Next()
	}
	return vms, nil
}

// boot starts the nodes' VMs and writes the admin kubeconfig.
func (n *node) boot() error {
	for _, vm := range n.vms {
		if err := n.bootVM(vm); err != nil {
			return fmt.Errorf("node %s: %w", vm.name, err)
		}
	}
	kubeconfig, err := n.cp.Kubeconfig("")
	if err != nil {
		return err
	}
	n.kubeconfig = filepath.Join(n.work, "admin.kubeconfig")
	return os.WriteFile(n.kubeconfig, kubeconfig, 0o600)
}

// bootVM starts qemu with the node's disk, its network card on its tap
// device. The node's name and addresses reach its init as variables on
// the kernel's command line. Several VMs share the one built disk, each
// writing to its own copy-on-write overlay that qemu removes at exit.
func (n *node) bootVM(vm *nodeVM) error {
	drive := "file=" + filepath.Join(n.work, "disk.img") + ",if=virtio,format=raw,cache=unsafe"
	if len(n.vms) > 1 {
		drive += ",snapshot=on"
	}
	limits, err := heartbeatLimitsFromEnv()
	if err != nil {
		return err
	}
	cmd := exec.Command("qemu-system-x86_64", nodeQemuArgs(vm, drive, filepath.Join(n.kernelDir, "vmlinuz"), filepath.Join(n.work, "initrd.gz"), n.config.mem)...)
	// The overlay is a temporary file.
	cmd.Env = append(os.Environ(), "TMPDIR="+vm.dir)
	cmd.Stderr = os.Stderr
	// A guest ends with vmtest, also when a signal ends vmtest before it
	// could stop the guest (an interrupted run left both guests running).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	qemu, err := testutil.StartProc(cmd, nil)
	if err != nil {
		return fmt.Errorf("starting qemu (apt-get install qemu-system-x86): %w", err)
	}
	vm.qemu = qemu
	// A node that stops writing its heartbeat gets an NMI, panics and
	// powers off: the test that needs it fails with its console's last
	// lines instead of waiting out its timeout.
	go watchHeartbeat(vm.files.heartbeat, vm.files.qmp, limits, qemu.Done(), qemu.Kill)
	return nil
}

// nodeQemuArgs are qemu's arguments for a node's VM: ttyS0 is its
// console, ttyS1 containerd's and the kubelet's logs, ttyS2 its heartbeat.
// Its kernel reports lockups and hung tasks with their backtraces
// (lockupReports, hungTaskReports; loglevel=7 prints the backtraces, which
// quiet's loglevel did not), and panics on the NMI vmtest sends a silent
// node. Unlike a test guest's, it does not panic on a soft lockup: no
// one boots a node again, and a lockup that passes leaves the node
// working; one that lasts silences the heartbeat.
func nodeQemuArgs(vm *nodeVM, drive, kernel, initrd string, mem int) []string {
	return []string{
		"-accel", "tcg", "-cpu", "max",
		"-smp", strconv.Itoa(envInt("VMTEST_CPUS", 2)), "-m", strconv.Itoa(mem),
		"-nographic", "-no-reboot", "-monitor", "none",
		"-serial", "file:" + vm.console, "-serial", "file:" + vm.logFile, "-serial", "file:" + vm.files.heartbeat,
		"-qmp", "unix:" + vm.files.qmp + ",server=on,wait=off",
		"-netdev", "tap,id=net0,ifname=" + vm.tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=net0,mac=" + vm.mac,
		"-drive", drive,
		"-kernel", kernel, "-initrd", initrd,
		"-append", fmt.Sprintf("console=ttyS0 loglevel=7 panic=-1 %s %s %s rdinit=/init NODE_NAME=%s NODE_IP=%s NODE_IP6=%s",
			lockupReports, unknownNMIPanics, hungTaskReports, vm.name, vm.ip, vm.ip6),
	}
}

func (n *node) stop() {
	for _, vm := range n.vms {
		if vm.qemu != nil {
			vm.qemu.Kill()
		}
	}
}

// waitReady waits until every node is Ready.
func (n *node) waitReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return err
	}
	for _, vm := range n.vms {
		if err := n.waitVMReady(ctx, client, vm); err != nil {
			return err
		}
	}
	return nil
}

// waitVMReady waits until vm's node is Ready. With more than one node, it
// routes the node's pod ranges to it in the namespace once the controller
// manager gave them.
func (n *node) waitVMReady(ctx context.Context, client kubernetes.Interface, vm *nodeVM) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := "not registered"
	for {
		if node, err := client.CoreV1().Nodes().Get(ctx, vm.name, metav1.GetOptions{}); err == nil {
			last = "registered"
			if len(n.vms) > 1 && vm.podCIDRs == nil && len(node.Spec.PodCIDRs) > 0 {
				if err := routePodCIDRs(vm, node.Spec.PodCIDRs); err != nil {
					return err
				}
			}
			for _, c := range node.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				last = c.Reason + ": " + c.Message
			}
		}
		select {
		case <-vm.qemu.Done():
			return &notReadyError{vm: vm, why: "qemu exited", err: vm.qemu.Err()}
		case <-ctx.Done():
			return &notReadyError{vm: vm, why: last, err: ctx.Err()}
		case <-tick.C:
		}
	}
}

// notReadyError is a node that was not Ready in time, or whose qemu exited
// first; its message ends with the guest's last console lines, where a
// hung or crashed kernel says why.
type notReadyError struct {
	vm  *nodeVM
	why string // the node's last Ready condition, or that qemu exited
	err error
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("node %s not Ready (%s): %v; its console's last lines:\n%s",
		e.vm.name, e.why, e.err, lastLines(readFileString(e.vm.console), 30))
}

func (e *notReadyError) Unwrap() error { return e.err }

// names are the nodes' names.
func (n *node) names() string {
	names := make([]string, len(n.vms))
	for i, vm := range n.vms {
		names[i] = vm.name
	}
	return strings.Join(names, ", ")
}

// residentMemory is what each node's qemu holds in memory, as the host
// counts it (VmRSS).
func (n *node) residentMemory() string {
	var parts []string
	for _, vm := range n.vms {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", vm.qemu.Cmd.Process.Pid))
		rss := "unknown"
		for _, line := range strings.Split(string(status), "\n") {
			if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok && err == nil {
				if v, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB"))); err == nil {
					rss = fmt.Sprintf("%d MiB", v/1024)
				}
			}
		}
		parts = append(parts, vm.name+" "+rss)
	}
	return strings.Join(parts, ", ")
}
