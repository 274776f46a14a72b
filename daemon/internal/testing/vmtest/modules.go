package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// moduleDirs are the parts of the kernel's module tree the guest carries:
// all of netfilter (IPVS, ipset, conntrack, nf_tables and what the kernel
// autoloads for them), the protocols and tunnels IPVS uses, the virtual
// links the tests build (nlmon taps netlink for the dataplane's floor
// benchmark), and virtio for the guest's network card. The
// modules they depend on come along through modules.dep.
var moduleDirs = []string{
	"kernel/net/netfilter",
	"kernel/net/ipv4",
	"kernel/net/ipv6",
	"kernel/net/sctp",
	"kernel/net/bridge",
	"kernel/drivers/virtio",
	"kernel/drivers/net/dummy.ko",
	"kernel/drivers/net/veth.ko",
	"kernel/drivers/net/macvlan.ko",
	"kernel/drivers/net/nlmon.ko",
	"kernel/drivers/net/virtio_net.ko",
}

// bootModules are loaded before the test starts, so a test finds IPVS and
// its schedulers, the set types and the rule engine already present.
var bootModules = []string{
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_sh",
	"ip_vs_mh", "ip_vs_sed", "ip_vs_nq",
	"veth", "nf_conntrack_netlink",
	"ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip",
	"ip_set_hash_ipportnet", "ip_set_hash_net", "ip_set_hash_netport",
	"ip_set_bitmap_port",
	"nf_tables", "nft_compat", "xt_set",
}

// stageModules copies the modules below dirs (paths in the kernel's module
// tree, such as moduleDirs) of the kernel at kernelDir, with the modules
// they depend on, into stage/lib/modules/<release> and runs depmod there,
// so the guest's modprobe (and the kernel's autoloading through it) sees a
// consistent tree.
func stageModules(kernelDir, release, stage string, dirs []string) error {
	src := filepath.Join(kernelDir, "lib/modules", release)
	deps, err := readModulesDep(filepath.Join(src, "modules.dep"))
	if err != nil {
		return err
	}
	want := map[string]bool{}
	var add func(string)
	add = func(mod string) {
		if want[mod] {
			return
		}
		want[mod] = true
		for _, d := range deps[mod] {
			add(d)
		}
	}
	for mod := range deps {
		for _, dir := range dirs {
			if mod == dir || strings.HasPrefix(mod, dir+"/") {
				add(mod)
			}
		}
	}
	dst := filepath.Join(stage, "lib/modules", release)
	for mod := range want {
		if err := copyFile(filepath.Join(src, mod), filepath.Join(dst, mod)); err != nil {
			return err
		}
	}
	for _, meta := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		if err := copyFile(filepath.Join(src, meta), filepath.Join(dst, meta)); err != nil {
			return err
		}
	}
	out, err := exec.Command("depmod", "-b", stage, release).CombinedOutput()
	if err != nil {
		return fmt.Errorf("depmod: %v: %s", err, out)
	}
	return nil
}

// readModulesDep maps each module's path to the paths it depends on.
func readModulesDep(name string) (map[string][]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if ok {
			deps[mod] = strings.Fields(rest)
		}
	}
	return deps, sc.Err()
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// addTree adds every file below root to the archive under guestRoot.
func (a *archive) addTree(root, guestRoot string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		guest := filepath.Join(guestRoot, rel)
		switch {
		case d.IsDir():
			a.dir(guest)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			a.symlink(guest, target)
		default:
			return a.copy(guest, p)
		}
		return nil
	})
}
