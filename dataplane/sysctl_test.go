package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

func TestWriteSysctlsChangesOnlyWhatDiffers(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"net/ipv4/vs/conntrack":                 "0\n",
		"net/ipv4/vs/expire_nodest_conn":        "1\n",
		"net/ipv4/vs/expire_quiescent_template": "0\n",
		"net/ipv4/ip_forward":                   "1\n",
		"net/ipv4/conf/all/arp_ignore":          "0\n",
		"net/ipv4/conf/all/arp_announce":        "0\n",
	}
	for name, v := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := model.Node{StrictARP: true}
	changed, err := WriteSysctls(root, n.Sysctls())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"net/ipv4/vs/conntrack", "net/ipv4/vs/expire_quiescent_template", "net/ipv4/conf/all/arp_ignore", "net/ipv4/conf/all/arp_announce"}
	if !slices.Equal(changed, want) {
		t.Errorf("changed %v, want %v", changed, want)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "net/ipv4/conf/all/arp_announce")); string(b) != "2" {
		t.Errorf("arp_announce = %q", b)
	}
	if changed, _ := WriteSysctls(root, n.Sysctls()); len(changed) != 0 {
		t.Errorf("a second run changed %v", changed)
	}
	if _, err := WriteSysctls(t.TempDir(), n.Sysctls()); !errors.Is(err, ErrSysctlNotExist) {
		t.Errorf("a missing setting: %v, want ErrSysctlNotExist", err)
	}
}

// conn_reuse_mode is set to 0 as kube-proxy sets it: on kernels from 4.1
// up to before 5.9 only.
func TestKernelSysctls(t *testing.T) {
	reuse := []model.Sysctl{{Name: "net/ipv4/vs/conn_reuse_mode", Value: 0}}
	for release, want := range map[string][]model.Sysctl{
		"3.10.0-1160.el7.x86_64":   nil,
		"4.0.9":                    nil,
		"4.1.0":                    reuse,
		"4.18.0-553.el8_10.x86_64": reuse,
		"5.4.0-150-generic":        reuse,
		"5.8.18":                   reuse,
		"5.9.0":                    nil,
		"5.10.0-28-amd64":          nil,
		"6.1.0-56-cloud-amd64":     nil,
		"10.2":                     nil,
		"4.19-rc1":                 reuse,
	} {
		got, err := kernelSysctls(release)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", release, got, err, want)
		}
	}
	for _, bad := range []string{"", "6", "linux", "x.1", "6.x"} {
		if _, err := kernelSysctls(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
