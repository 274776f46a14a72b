package main

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

//go:embed node
var nodeFiles embed.FS

// node is the booted cluster: its nodes' VMs and what they were built
// from.
type node struct {
	config    nodeConfig
	cp        *controlplane.ControlPlane
	work      string
	kernelDir string
	release   string
	vms       []*nodeVM // the first is the node the command's variables name

	kubeconfig string // the admin kubeconfig on the host
	overlay    string // the kustomization over deploy/ that installs ipvsplane
}

// nodeModuleDirs are the kernel modules the first stage needs to find the
// root disk; the root carries all of them.
var nodeModuleDirs = []string{"kernel/drivers/virtio", "kernel/drivers/block/virtio_blk.ko"}

// nodeModules are loaded at boot: the container runtime's and CNI's, and
// IPVS with its schedulers and the rest of what a proxy programs.
var nodeModules = append([]string{"overlay", "bridge", "br_netfilter", "nf_conntrack", "virtio_net",
	"ip_vs_dh", "ip_vs_lblc", "ip_vs_lblcr", "ip_vs_fo", "ip_vs_ovf"}, bootModules...)

// nodeTools are host programs the node carries with their libraries: the
// iptables (nf_tables flavour) the CNI portmap plugin uses, and the
// readers an operator would reach for.
var nodeTools = []string{
	"ip", "nft", "ipvsadm", "ipset", "conntrack",
	"iptables=iptables-nft", "iptables-save=iptables-nft-save", "iptables-restore=iptables-nft-restore",
	"ip6tables=ip6tables-nft", "ip6tables-save=ip6tables-nft-save", "ip6tables-restore=ip6tables-nft-restore",
	"/usr/lib/x86_64-linux-gnu/xtables",
}

// buildDisk writes the first stage's initramfs and the root disk, which
// every node boots from: what sets one node apart is on its kernel's
// command line (bootVM), and its pod ranges reach its CNI configuration
// through the kubelet and containerd.
func (n *node) buildDisk() error {
	if err := n.buildFirstStage(); err != nil {
		return err
	}
	root := filepath.Join(n.work, "root")
	if err := stageModules(n.kernelDir, n.release, root, []string{"kernel"}); err != nil {
		return fmt.Errorf("kernel modules: %w", err)
	}
	a, err := n.rootArchive()
	if err != nil {
		return err
	}
	if err := a.writeDir(root); err != nil {
		return err
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "root", "-E", "root_owner=0:0",
		"-d", root, filepath.Join(n.work, "disk.img"), "6G").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 (apt-get install e2fsprogs): %v: %s", err, out)
	}
	return os.RemoveAll(root)
}

func (n *node) buildFirstStage() error {
	stage := filepath.Join(n.work, "stage1")
	if err := stageModules(n.kernelDir, n.release, stage, nodeModuleDirs); err != nil {
		return fmt.Errorf("kernel modules: %w", err)
	}
	a := newArchive()
	if err := a.copy("/bin/busybox", "/bin/busybox"); err != nil {
		return fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	if err := a.addTree(filepath.Join(stage, "lib/modules"), "/lib/modules"); err != nil {
		return err
	}
	init, err := nodeFiles.ReadFile("node/init")
	if err != nil {
		return err
	}
	a.file("/init", 0o755, init)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := a.write(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.work, "initrd.gz"), buf.Bytes(), 0o644)
}

// rootArchive collects the root disk's files (but the kernel modules).
func (n *node) rootArchive() (*archive, error) {
	a := newArchive()
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/var/lib", "/var/log", "/etc/kubenode", "/images"} {
		a.dir(d)
	}
	if err := a.copy("/bin/busybox", "/bin/busybox"); err != nil {
		return nil, fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	// The kernel autoloads modules (nft's chain types, IPVS schedulers)
	// through /sbin/modprobe.
	a.symlink("/sbin/modprobe", "/bin/busybox")
	for _, f := range []string{"/etc/protocols", "/etc/services"} {
		if err := a.copy(f, f); err != nil {
			return nil, err
		}
	}
	a.file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.file("/etc/group", 0o644, []byte("root:x:0:\n"))
	hosts := "127.0.0.1 localhost\n" + controlplane.ClusterHostAddr + " " + controlplane.ClusterHostName + "\n"
	for _, vm := range n.vms {
		hosts += vm.ip.String() + " " + vm.name + "\n"
	}
	a.file("/etc/hosts", 0o644, []byte(hosts))
	a.file("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
	a.file("/etc/kubenode/resolv.conf", 0o644, []byte("nameserver 127.0.0.1\n"))
	for _, step := range []func(*archive) error{n.addConfig, n.addRuntime, n.addImages} {
		if err := step(a); err != nil {
			return nil, err
		}
	}
	for _, tool := range nodeTools {
		if err := a.addTool(tool); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// addConfig adds the init script and the nodes' configuration. The CNI
// configuration is containerd's template (conf_template), which it fills
// in with the node's pod ranges once the kubelet has them from the
// controller manager's node IPAM.
func (n *node) addConfig(a *archive) error {
	files := map[string]string{
		"/sbin/init-node":                 "node/init-node",
		"/etc/containerd/config.toml":     "node/containerd.toml",
		"/etc/kubenode/kubelet.yaml":      "node/kubelet.yaml",
		"/etc/kubenode/cni.conflist.tmpl": "node/cni.conflist.tmpl",
	}
	for guest, src := range files {
		data, err := nodeFiles.ReadFile(src)
		if err != nil {
			return err
		}
		mode := uint32(0o644)
		if strings.HasPrefix(guest, "/sbin/") {
			mode = 0o755
		}
		a.file(guest, mode, data)
	}
	a.dir("/etc/cni/net.d")
	kubeconfig, err := n.cp.Kubeconfig(fmt.Sprintf("https://%s:%d", controlplane.ClusterHostAddr, n.cp.Port()))
	if err != nil {
		return err
	}
	a.file("/etc/kubenode/kubelet.kubeconfig", 0o600, kubeconfig)
	env := fmt.Sprintf("HOST_ADDR=%s\nHOST_ADDR6=%s\nMODULES='%s'\n",
		controlplane.ClusterHostAddr, hostIP6, strings.Join(nodeModules, " "))
	a.file("/etc/kubenode/env", 0o644, []byte(env))
	return nil
}

// renderNodeFile is one of the embedded node files, a template, filled in
// with vars.
func renderNodeFile(name string, vars any) ([]byte, error) {
	text, err := nodeFiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(name).Parse(string(text))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, vars); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// addRuntime adds containerd, runc and the CNI plugins from Debian's
// packages (hack/fetch-node-packages), and the kubelet.
func (n *node) addRuntime(a *archive) error {
	cache, err := controlplane.CacheBase()
	if err != nil {
		return err
	}
	pkgs := filepath.Join(cache, "node", "bookworm", "root")
	programs := map[string]string{}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		programs["/usr/bin/"+p] = filepath.Join(pkgs, "usr/bin", p)
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		programs["/usr/lib/cni/"+p] = filepath.Join(pkgs, "usr/lib/cni", p)
	}
	kubelet, err := controlplane.KubeProgram("kubelet")
	if err != nil {
		return fmt.Errorf("%w (hack/build-kube kubelet)", err)
	}
	programs["/usr/bin/kubelet"] = kubelet
	for guest, host := range programs {
		if err := a.copyWithLibraries(guest, host); err != nil {
			return fmt.Errorf("%w (hack/fetch-node-packages)", err)
		}
	}
	return nil
}

// addImages adds the OCI archives the init script imports: those of
// hack/build-images and the ipvsplane image.
func (n *node) addImages(a *archive) error {
	cache, err := controlplane.CacheBase()
	if err != nil {
		return err
	}
	dir := filepath.Join(cache, "images", controlplane.KubeVersion)
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil || len(tars) == 0 {
		return fmt.Errorf("no images in %s (hack/build-images)", dir)
	}
	if n.config.image != "" {
		tars = append(tars, n.config.image)
	}
	for _, t := range tars {
		if err := a.copy("/images/"+filepath.Base(t), t); err != nil {
			return err
		}
	}
	return nil
}

// copyWithLibraries adds a host program under guest and the shared
// libraries ldd names for it at their own paths.
func (a *archive) copyWithLibraries(guest, host string) error {
	if err := a.copy(guest, host); err != nil {
		return err
	}
	libs, err := sharedLibraries(host)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return err
		}
		if err := a.copy(lib, real); err != nil {
			return err
		}
	}
	return nil
}

// writeDir writes the archive's entries as files below root, as the
// kernel would unpack them.
func (a *archive) writeDir(root string) error {
	for name, e := range a.entries {
		dst := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		perm := fs.FileMode(e.mode & 0o7777)
		switch e.mode & 0o170000 {
		case modeDir:
			if err := os.MkdirAll(dst, perm); err != nil {
				return err
			}
		case modeSymlink:
			if err := os.Symlink(string(e.content), dst); err != nil && !os.IsExist(err) {
				return err
			}
		default:
			data := e.content
			if data == nil && e.source != "" {
				var err error
				if data, err = os.ReadFile(e.source); err != nil {
					return err
				}
			}
			if err := os.WriteFile(dst, data, perm); err != nil {
				return err
			}
		}
	}
	return nil
}

// logTail is the last lines each node streamed of its logs.
func (n *node) logTail(lines int) string {
	tails := make([]string, len(n.vms))
	for i, vm := range n.vms {
		tails[i] = vm.logTail(lines)
		if len(n.vms) > 1 {
			tails[i] = "node " + vm.name + "'s " + tails[i]
		}
	}
	return strings.Join(tails, "\n")
}

// logTail is the init script's console lines (and the kernel's once it
// reported trouble) and the last lines the node streamed of its logs.
func (vm *nodeVM) logTail(lines int) string {
	var says []string
	oops := false
	for _, l := range strings.Split(readFileString(vm.console), "\n") {
		// The init script's lines, and whatever the kernel says once it
		// reports trouble (a guest that stops answering may have).
		oops = oops || kernelIncident.MatchString(l)
		if oops || strings.Contains(l, "kubenode:") {
			says = append(says, strings.TrimSpace(l))
		}
	}
	return "console:\n" + strings.Join(says, "\n") + "\nlogs (" + path.Base(vm.logFile) + "):\n" + lastLines(readFileString(vm.logFile), lines)
}

// readFileString is the file's content, or nothing if it cannot be read: a
// log that is not there yet says nothing.
func readFileString(name string) string {
	data, _ := os.ReadFile(name)
	return string(data)
}

// lastLines is text's last n lines, without carriage returns (a serial
// console writes them).
func lastLines(text string, n int) string {
	all := strings.Split(strings.TrimRight(strings.ReplaceAll(text, "\r", ""), "\n"), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

func (n *node) withLogs(err error) error {
	return fmt.Errorf("%w\n%s", err, n.logTail(60))
}
