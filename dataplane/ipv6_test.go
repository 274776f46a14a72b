package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// IPv6 is there as kube-proxy's platformCheckSupported finds it: a kernel
// booted with ipv6.disable=1 has no if_inet6 (nor net/ipv6 sysctls), and
// one with net.ipv6.conf.all.disable_ipv6 = 1 has it off.
func TestHasIPv6(t *testing.T) {
	for _, tt := range []struct {
		name           string
		inet6, disable string // "" leaves the file out
		want           bool
	}{
		{"dual-stack kernel", "00000000000000000000000000000001 01 80 10 80       lo\n", "0\n", true},
		{"booted with ipv6.disable=1", "", "", false},
		{"IPv6 disabled by sysctl", "", "1\n", false},
		{"IPv6 disabled, interfaces listed", "x\n", "1\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			procNet, procSys := filepath.Join(dir, "net"), filepath.Join(dir, "sys")
			conf := filepath.Join(procSys, "net", "ipv6", "conf", "all")
			for _, d := range []string{procNet, conf} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for file, text := range map[string]string{filepath.Join(procNet, "if_inet6"): tt.inet6, filepath.Join(conf, "disable_ipv6"): tt.disable} {
				if text != "" {
					if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got, err := hasIPv6(procNet, procSys); err != nil || got != tt.want {
				t.Errorf("hasIPv6 = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// Without IPv6 the dataplane serves the node IPv4Only, on a copy: the
// caller's state stays as it was.
func TestServedWithoutIPv6(t *testing.T) {
	state := &model.State{Node: model.Node{Name: "node-a"}}
	if got := (&nodeSettings{ipv6: true}).served(state); got != state || got.Node.IPv4Only {
		t.Error("a kernel with IPv6 changed the state")
	}
	got := (&nodeSettings{}).served(state)
	if !got.Node.IPv4Only || state.Node.IPv4Only {
		t.Errorf("without IPv6: served IPv4Only %v, caller's %v; want true, false", got.Node.IPv4Only, state.Node.IPv4Only)
	}
}
