package conntracksettings

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// kubeProxyDefaults is kube-proxy's conntrack configuration when the
// configuration sets none (the daemon's defaults).
func kubeProxyDefaults() *kubeproxy.KubeProxyConntrackConfiguration {
	return &kubeproxy.KubeProxyConntrackConfiguration{
		MaxPerCore: new(int32(32 * 1024)), Min: new(int32(128 * 1024)),
		TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour}, TCPCloseWaitTimeout: &metav1.Duration{Duration: time.Hour},
	}
}

// conntrackRoot makes /proc/sys and the module's parameters with the
// given files and values.
func conntrackRoot(t *testing.T, files map[string]string) Paths {
	t.Helper()
	root := t.TempDir()
	p := Paths{ProcSys: filepath.Join(root, "proc/sys"), ModuleParams: filepath.Join(root, "params")}
	for name, v := range files {
		path := filepath.Join(p.ProcSys, name)
		if name == "hashsize" {
			path = filepath.Join(p.ModuleParams, name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func readSetting(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

var kernelDefaults = map[string]string{
	"net/netfilter/nf_conntrack_max": "65536",
	"hashsize":                       "16384",
	"net/netfilter/nf_conntrack_tcp_timeout_established": "432000",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "60",
	"net/netfilter/nf_conntrack_tcp_be_liberal":          "0",
	"net/netfilter/nf_conntrack_udp_timeout":             "30",
	"net/netfilter/nf_conntrack_udp_timeout_stream":      "120",
}

// kube-proxy's defaults: the table grows to max(32768 per CPU, 131072)
// with a hash of a quarter of that, established TCP flows time out after
// a day and CLOSE_WAIT after an hour; the rest stays.
func TestConntrackDefaults(t *testing.T) {
	p := conntrackRoot(t, kernelDefaults)
	changed, skipped, err := Apply(kubeProxyDefaults(), 2, p)
	if err != nil || skipped != nil {
		t.Fatal(err, skipped)
	}
	want := map[string]string{
		"net/netfilter/nf_conntrack_max":                     "131072",
		"net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "3600",
		"net/netfilter/nf_conntrack_tcp_be_liberal":          "0",
		"net/netfilter/nf_conntrack_udp_timeout":             "30",
		"net/netfilter/nf_conntrack_udp_timeout_stream":      "120",
	}
	for name, v := range want {
		if got := readSetting(t, filepath.Join(p.ProcSys, name)); got != v {
			t.Errorf("%s = %s, want %s", name, got, v)
		}
	}
	if got := readSetting(t, filepath.Join(p.ModuleParams, "hashsize")); got != "32768" {
		t.Errorf("hashsize = %s, want 32768", got)
	}
	if len(changed) != 4 {
		t.Errorf("changed %v", changed)
	}
	// With 8 CPUs the per-core figure wins; a bigger table stays.
	if _, _, err := Apply(kubeProxyDefaults(), 8, p); err != nil {
		t.Fatal(err)
	}
	if got := readSetting(t, filepath.Join(p.ProcSys, "net/netfilter/nf_conntrack_max")); got != "262144" {
		t.Errorf("8 CPUs: nf_conntrack_max = %s, want 262144", got)
	}
	if changed, _, _ := Apply(kubeProxyDefaults(), 2, p); len(changed) != 0 {
		t.Errorf("a smaller table: changed %v; kube-proxy never lowers it", changed)
	}
}

func TestConntrackSettings(t *testing.T) {
	c := *kubeProxyDefaults()
	c.MaxPerCore = new(int32(0))
	c.TCPEstablishedTimeout = &metav1.Duration{}
	c.TCPCloseWaitTimeout = &metav1.Duration{Duration: 90 * time.Second}
	c.TCPBeLiberal = true
	c.UDPTimeout.Duration = 10 * time.Second
	c.UDPStreamTimeout.Duration = 5 * time.Minute
	p := conntrackRoot(t, kernelDefaults)
	changed, _, err := Apply(&c, 4, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"net/netfilter/nf_conntrack_tcp_timeout_close_wait", "net/netfilter/nf_conntrack_tcp_be_liberal",
		"net/netfilter/nf_conntrack_udp_timeout", "net/netfilter/nf_conntrack_udp_timeout_stream"}
	if !slices.Equal(changed, want) {
		t.Errorf("changed %v, want %v (maxPerCore 0 and a zero timeout leave theirs)", changed, want)
	}
	for name, v := range map[string]string{
		"net/netfilter/nf_conntrack_max": "65536", "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "90",
		"net/netfilter/nf_conntrack_udp_timeout_stream": "300", "net/netfilter/nf_conntrack_tcp_be_liberal": "1",
	} {
		if got := readSetting(t, filepath.Join(p.ProcSys, name)); got != v {
			t.Errorf("%s = %s, want %s", name, got, v)
		}
	}
}

// 2^20 caps the per-core product on many-core nodes, as kube-proxy caps
// it; a larger conntrack.min is the operator's and is kept, unless the
// product itself went over the cap (kube-proxy's getConntrackMax).
func TestConntrackMax(t *testing.T) {
	c := *kubeProxyDefaults()
	for cpus, want := range map[int]int{1: 131072, 4: 131072, 5: 163840, 64: 1 << 20} {
		if got := conntrackMax(&c, cpus); got != want {
			t.Errorf("%d CPUs: %d, want %d", cpus, got, want)
		}
	}
	c.Min = new(int32(2 << 20))
	for cpus, want := range map[int]int{1: 2 << 20, 32: 2 << 20, 33: 1 << 20, 64: 1 << 20} {
		if got := conntrackMax(&c, cpus); got != want {
			t.Errorf("min 2^21, %d CPUs: %d, want %d", cpus, got, want)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for list, want := range map[string]int{"0": 1, "0-3": 4, "0-3,6,8-9": 7} {
		if got, err := countCPUList(list); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", list, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "3-1"} {
		if _, err := countCPUList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
