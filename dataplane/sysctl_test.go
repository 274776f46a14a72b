package dataplane

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
	n := Node{StrictARP: true}
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
	if _, err := WriteSysctls(t.TempDir(), n.Sysctls()); !errors.Is(err, ErrNoSysctl) {
		t.Errorf("a missing setting: %v, want ErrNoSysctl", err)
	}
}
