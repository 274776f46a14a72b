//go:build vmtest

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

// A scheduler whose module the kernel cannot load stops apply before it
// programs anything, naming the module; once the module can be loaded,
// the check loads it and leaves no probe virtual server behind.
func TestSchedulerCheck(t *testing.T) {
	testutil.RequireVM(t)
	node := testutil.NewNetNS(t)
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(uts.Release[:]), "kernel/net/netfilter/ipvs")
	module := filepath.Join(dir, "ip_vs_dh.ko")
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("the guest has no ip_vs_dh module to hide: %v", err)
	}
	if strings.Contains(readFile(t, "/proc/modules"), "ip_vs_dh ") {
		t.Fatal("ip_vs_dh is loaded already; the test needs a scheduler the guest has not loaded")
	}
	if err := os.Rename(module, module+".hidden"); err != nil {
		t.Fatal(err)
	}
	restore := func() { os.Rename(module+".hidden", module) }
	t.Cleanup(restore)

	manifests := copyManifests(t)
	args := []string{"apply", "--once", "--source=files", "--manifests", manifests, "--hostname-override=node-a", "--ipvs-scheduler=dh"}
	out, err := ipvsplane(t, node, args...)
	if err == nil || !strings.Contains(out, "ip_vs_dh") {
		t.Errorf("apply with a scheduler the kernel lacks: %v\n%s", err, out)
	}
	if table := ipvsTable(t, node); len(table) != 0 {
		t.Errorf("apply programmed %d virtual servers before refusing", len(table))
	}

	restore()
	if out, err := ipvsplane(t, node, args...); err != nil {
		t.Fatalf("apply once the module is there: %v\n%s", err, out)
	}
	for _, vs := range ipvsTable(t, node) {
		if vs.Service.Addr.String() == "198.51.100.0" {
			t.Errorf("the probe virtual server is left: %v", vs.Service)
		}
		if vs.Service.Scheduler != "dh" {
			t.Errorf("%v: scheduler %q", vs.Service, vs.Service.Scheduler)
		}
	}
	if out, err := ipvsplane(t, node, "cleanup"); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
}

// The daemon writes kube-proxy's conntrack settings (its defaults and the
// flags) and the IPVS sysctls, and leaves conn_reuse_mode on a 5.9 or
// newer kernel. The table's size is the host's: from the node's network
// namespace it cannot be raised, which is logged, and the rest is set.
func TestDaemonKernelSettings(t *testing.T) {
	n := setupNet(t)
	sysctl := func(name string) string {
		return strings.TrimSpace(n.node.Run(t, "cat", "/proc/sys/"+name))
	}
	reuse := sysctl("net/ipv4/vs/conn_reuse_mode")
	d := startDaemon(t, n.node, copyManifests(t), "--conntrack-tcp-timeout-close-wait=90s",
		"--conntrack-udp-timeout=20s", "--conntrack-udp-timeout-stream=3m", "--conntrack-tcp-be-liberal")
	d.WaitSynced(t, 2*time.Minute)
	for name, want := range map[string]string{
		"net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "90",
		"net/netfilter/nf_conntrack_udp_timeout":             "20",
		"net/netfilter/nf_conntrack_udp_timeout_stream":      "180",
		"net/netfilter/nf_conntrack_tcp_be_liberal":          "1",
		"net/ipv4/vs/conntrack":                              "1",
		"net/ipv4/vs/expire_nodest_conn":                     "1",
		"net/ipv4/vs/conn_reuse_mode":                        reuse,
	} {
		if got := sysctl(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	max := sysctl("net/netfilter/nf_conntrack_max")
	logged := strings.Contains(d.Out.String(), "conntrack table size left as it is")
	t.Logf("nf_conntrack_max %s in the node's namespace; read-only logged: %v; conn_reuse_mode %s", max, logged, reuse)
	if max != "131072" && !logged {
		t.Errorf("nf_conntrack_max = %s, neither raised to 131072 nor logged as read-only:\n%s", max, d.Out.String())
	}
}

// --init-only makes the node's settings (the scheduler check, the IPVS
// sysctls) and exits without programming a service, as kube-proxy's.
func TestInitOnly(t *testing.T) {
	testutil.RequireVM(t)
	node := testutil.NewNetNS(t)
	out, err := ipvsplane(t, node, "run", "--init-only", "--source=files", "--manifests", copyManifests(t),
		"--hostname-override=node-a", "--ipvs-strict-arp", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file=")
	if err != nil {
		t.Fatalf("--init-only: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"net/ipv4/vs/conntrack": "1", "net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2"} {
		if got := strings.TrimSpace(node.Run(t, "cat", "/proc/sys/"+name)); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if table := ipvsTable(t, node); len(table) != 0 {
		t.Errorf("--init-only programmed %d virtual servers", len(table))
	}
}
