//go:build vmtest

package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// acceptedDifference is a difference between kube-proxy's kernel state
// and ipvsplane's that docs/kube-proxy-comparison.md explains.
type acceptedDifference struct {
	pattern *regexp.Regexp
	// doc names the section of docs/kube-proxy-comparison.md.
	doc string
}

// acceptedDifferences are matched against snapshotDiff's lines; any other
// difference fails TestKubeProxyComparison. The patterns are as narrow as
// the services of kubeProxyShapes allow.
var acceptedDifferences = []acceptedDifference{
	{regexp.MustCompile(`^ipset ipvsplane-only: (create|add|header) KUBE(-6)?-IPVSPLANE-OWNED `), "D1 ownership sets"},
}

// TestKubeProxyComparison runs kube-proxy in IPVS mode and then ipvsplane
// with the same KubeProxyConfiguration file against the same Services and
// EndpointSlices, and compares the kernel state each leaves: IPVS virtual
// and real servers, the addresses on kube-ipvs0, the ipsets and the
// sysctls must be equal except where docs/kube-proxy-comparison.md says
// why not. The rules (iptables chains against ipvsplane's nftables table)
// are logged for the document's rule-by-rule mapping.
func TestKubeProxyComparison(t *testing.T) {
	e := newKubeProxyEnv(t, "kp-compare")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var services []*corev1.Service
	for _, s := range kubeProxyShapes() {
		services = append(services, e.create(ctx, t, s))
	}
	for _, s := range services {
		t.Logf("service %s: clusterIP %s ports %v", s.Name, s.Spec.ClusterIP, s.Spec.Ports)
	}
	web := services[0].Spec.ClusterIP + ":80"
	lbFW := "192.0.2.11:8443"

	kp := e.startKubeProxy(t)
	kpState, took := waitKernel(t, kp, 8*time.Minute, func(s *kernelSnapshot) bool {
		return s.hasVirtual(web) && s.hasVirtual(lbFW) && strings.Contains(s.iptables, "-A KUBE-IPVS-OUT-FILTER")
	})
	t.Logf("kube-proxy settled in %v", took)
	kpConfigz := getConfigz(t, "127.0.0.1:10249")
	kp.stop(t)
	t.Logf("kube-proxy's state:\n%s", kpState)

	e.cleanupKubeProxy(ctx, t)

	ip := e.startIPVSPlane(t)
	ipState, took := waitKernel(t, ip, 5*time.Minute, func(s *kernelSnapshot) bool {
		return s.hasVirtual(web) && s.hasVirtual(lbFW) && strings.Contains(s.nft, "table ip ipvsplane {")
	})
	t.Logf("ipvsplane settled in %v", took)
	ipConfigz := getConfigz(t, "127.0.0.1:10249")
	ip.stop(t)
	t.Logf("ipvsplane's state:\n%s", ipState)
	if out, err := exec.CommandContext(ctx, "ipvsplane", "cleanup", "--state-file=").CombinedOutput(); err != nil {
		t.Errorf("ipvsplane cleanup: %v\n%s", err, out)
	}

	accepted := 0
	for _, d := range snapshotDiff(kpState, ipState) {
		doc := ""
		for _, a := range acceptedDifferences {
			if a.pattern.MatchString(d) {
				doc = a.doc
				break
			}
		}
		if doc == "" {
			t.Errorf("undocumented difference: %s", d)
			continue
		}
		accepted++
		t.Logf("documented difference (%s): %s", doc, d)
	}
	t.Logf("%d documented differences", accepted)
	for _, d := range configzDiff(kpConfigz, ipConfigz) {
		t.Errorf("/configz differs: %s", d)
	}
}

// cleanupKubeProxy removes the state of a stopped kube-proxy with its own
// `kube-proxy --cleanup`, then what that left, and sets the sysctls back
// to the kernel's defaults: the next proxy starts from a clean node,
// adopts nothing, and is seen to set the sysctls rather than find them
// set.
func (e *kubeProxyEnv) cleanupKubeProxy(ctx context.Context, t *testing.T) {
	t.Helper()
	out, err := exec.CommandContext(ctx, "kube-proxy", "--cleanup", "--config="+e.configFile).CombinedOutput()
	t.Logf("kube-proxy --cleanup: %v\n%s", err, lastLines(string(out), 20))
	left := takeSnapshot(t)
	t.Logf("left after kube-proxy --cleanup: %d IPVS lines, %d set lines, kube-ipvs0 %q, KUBE- rule lines %d",
		len(left.ipvs), len(left.sets), left.link, strings.Count(left.iptables, "KUBE-"))
	removeKubeProxyLeftovers(t, left)
	resetProxySysctls(t)
}

// kernelDefaultSysctls are the values of kubeProxySysctls on a fresh
// kernel.
var kernelDefaultSysctls = map[string]string{
	"net/ipv4/vs/conntrack": "0", "net/ipv4/vs/expire_nodest_conn": "0", "net/ipv4/vs/expire_quiescent_template": "0",
	"net/ipv4/vs/conn_reuse_mode": "1", "net/ipv4/ip_forward": "0", "net/ipv4/conf/all/arp_ignore": "0",
	"net/ipv4/conf/all/arp_announce": "0", "net/ipv4/conf/all/route_localnet": "0",
}

// resetProxySysctls sets the sysctls either proxy sets to the kernel's
// defaults.
func resetProxySysctls(t *testing.T) {
	t.Helper()
	for _, name := range kubeProxySysctls {
		if err := os.WriteFile("/proc/sys/"+name, []byte(kernelDefaultSysctls[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// removeKubeProxyLeftovers removes what kube-proxy --cleanup left, so that
// ipvsplane starts from a clean node and adopts nothing.
func removeKubeProxyLeftovers(t *testing.T, left *kernelSnapshot) {
	t.Helper()
	if len(left.ipvs) > 0 {
		runTool(t, "ipvsadm", "-C")
	}
	if left.link != "" {
		runTool(t, "ip", "link", "del", "kube-ipvs0")
	}
	// kube-proxy --cleanup can fail half-way (it does in
	// TestKubeProxyTakeover: ip6tables-restore finds KUBE-PROXY-FIREWALL
	// busy); the chains go before the sets they match.
	if strings.Contains(left.iptables, "KUBE-") {
		for _, cmd := range []string{"iptables", "ip6tables"} {
			for _, table := range []string{"nat", "filter"} {
				removeKubeChains(t, cmd, table)
			}
		}
	}
	for _, l := range left.sets {
		if f := strings.Fields(l); f[0] == "create" {
			runTool(t, "ipset", "destroy", f[1])
		}
	}
}

// removeKubeChains deletes a table's KUBE-* chains and the rules that jump
// to them, with the iptables program given.
func removeKubeChains(t *testing.T, cmd, table string) {
	t.Helper()
	removeChains(t, cmd, table, func(c string) bool { return strings.HasPrefix(c, "KUBE-") }, nil)
}

// removeChains deletes a table's chains that mine says are to go, the
// rules of other chains that jump to them, and the rules of other chains
// that rule (if not nil) says are to go, with the iptables program given.
func removeChains(t *testing.T, cmd, table string, mine, rule func(string) bool) {
	t.Helper()
	var chains []string
	for _, l := range lines(runTool(t, cmd, "-t", table, "-S")) {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "-N" && mine(f[1]):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && !mine(f[1]) && (jumpsTo(f, mine) || rule != nil && rule(l)):
			// The rule as -S prints it, quotes and all, through a shell.
			runTool(t, "sh", "-c", cmd+" -t "+table+" -D "+strings.TrimPrefix(l, "-A "))
		}
	}
	for _, c := range chains {
		runTool(t, cmd, "-t", table, "-F", c)
	}
	for _, c := range chains {
		runTool(t, cmd, "-t", table, "-X", c)
	}
}

// jumpsTo reports whether a rule's fields jump (-j, -g) to a chain mine
// names.
func jumpsTo(f []string, mine func(string) bool) bool {
	for i := 1; i < len(f); i++ {
		if (f[i-1] == "-j" || f[i-1] == "-g") && mine(f[i]) {
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
