package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// boot starts qemu with the node's disk, its network card on the
// namespace's tap device.
func (n *node) boot() error {
	n.console = filepath.Join(n.work, "console.log")
	n.logFile = filepath.Join(n.work, "node.log")
	cmd := exec.Command("qemu-system-x86_64",
		"-accel", "tcg", "-cpu", "max",
		"-smp", strconv.Itoa(envInt("VMTEST_CPUS", 2)), "-m", strconv.Itoa(n.config.mem),
		"-nographic", "-no-reboot", "-monitor", "none",
		"-serial", "file:"+n.console, "-serial", "file:"+n.logFile,
		"-netdev", "tap,id=net0,ifname="+tapName+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=net0",
		"-drive", "file="+filepath.Join(n.work, "disk.img")+",if=virtio,format=raw,cache=unsafe",
		"-kernel", filepath.Join(n.kernelDir, "vmlinuz"), "-initrd", filepath.Join(n.work, "initrd.gz"),
		"-append", "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init")
	cmd.Stderr = os.Stderr
	qemu, err := testutil.StartProc(cmd, nil)
	if err != nil {
		return fmt.Errorf("starting qemu (apt-get install qemu-system-x86): %w", err)
	}
	n.qemu = qemu
	kubeconfig, err := n.cp.Kubeconfig("")
	if err != nil {
		return err
	}
	n.kubeconfig = filepath.Join(n.work, "admin.kubeconfig")
	return os.WriteFile(n.kubeconfig, kubeconfig, 0o600)
}

func (n *node) stop() {
	if n.qemu != nil {
		n.qemu.Kill()
	}
}

// waitReady waits until the node is Ready.
func (n *node) waitReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := "not registered"
	for {
		if node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			last = "registered"
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
		case <-n.qemu.Done():
			return fmt.Errorf("qemu exited before the node was Ready: %v", n.qemu.Err())
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready (%s): %w", nodeName, last, ctx.Err())
		case <-tick.C:
		}
	}
}
