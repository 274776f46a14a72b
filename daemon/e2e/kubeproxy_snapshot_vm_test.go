//go:build vmtest

package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// kernelSnapshot is a node's proxy state as independent readers print it:
// ipvsadm, ip, ipset, iptables-save, nft and /proc/sys.
type kernelSnapshot struct {
	// ipvs holds `ipvsadm -Sn` lines, sorted: one per virtual server
	// (-A) and real server (-a), without counters.
	ipvs []string
	// addrs holds the addresses on kube-ipvs0, sorted.
	addrs []string
	// link is kube-ipvs0's type and state.
	link string
	// sets holds `ipset save` lines of the KUBE-* sets, sorted, with the
	// random hash seed (initval) left out.
	sets     []string
	sysctls  []string
	iptables string
	nft      string
}

// kubeProxySysctls are the sysctls either proxy sets.
var kubeProxySysctls = []string{
	"net/ipv4/vs/conntrack", "net/ipv4/vs/expire_nodest_conn", "net/ipv4/vs/expire_quiescent_template",
	"net/ipv4/vs/conn_reuse_mode", "net/ipv4/ip_forward", "net/ipv4/conf/all/arp_ignore",
	"net/ipv4/conf/all/arp_announce", "net/ipv4/conf/all/route_localnet",
}

var (
	initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)
	// counters change with traffic, not with what a proxy programs.
	counters = regexp.MustCompile(`counter packets [0-9]+ bytes [0-9]+`)
)

// takeSnapshot reads the node's state with the command-line tools.
func takeSnapshot(t *testing.T) *kernelSnapshot {
	t.Helper()
	s := &kernelSnapshot{}
	s.ipvs = lines(runTool(t, "ipvsadm", "-Sn"))
	slices.Sort(s.ipvs)
	if out, err := exec.Command("ip", "-o", "addr", "show", "dev", "kube-ipvs0").Output(); err == nil {
		for _, l := range lines(string(out)) {
			f := strings.Fields(l)
			for i := range f {
				if (f[i] == "inet" || f[i] == "inet6") && i+1 < len(f) {
					s.addrs = append(s.addrs, f[i+1])
				}
			}
		}
		slices.Sort(s.addrs)
	}
	if out, err := exec.Command("ip", "-d", "-o", "link", "show", "dev", "kube-ipvs0").Output(); err == nil {
		f := strings.Fields(string(out))
		// "N: kube-ipvs0: <FLAGS> mtu ... state DOWN ... dummy ..."
		for i := range f {
			if i == 2 || f[i] == "dummy" || (i > 0 && f[i-1] == "state") {
				s.link += f[i] + " "
			}
		}
		s.link = strings.TrimSpace(s.link)
	}
	for _, l := range lines(runTool(t, "ipset", "save")) {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "KUBE-") {
			s.sets = append(s.sets, initval.ReplaceAllString(l, ""))
		}
	}
	s.sets = append(s.sets, setHeaders(runTool(t, "ipset", "list", "-t"))...)
	slices.Sort(s.sets)
	for _, name := range kubeProxySysctls {
		b, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			t.Fatal(err)
		}
		s.sysctls = append(s.sysctls, strings.ReplaceAll(name, "/", ".")+"="+strings.TrimSpace(string(b)))
	}
	// Without the comment lines, which carry the time.
	for _, l := range lines(runTool(t, "iptables-save") + runTool(t, "ip6tables-save")) {
		if !strings.HasPrefix(l, "#") {
			s.iptables += l + "\n"
		}
	}
	s.nft = counters.ReplaceAllString(runTool(t, "nft", "list", "ruleset"), "counter")
	return s
}

// setHeaders turns `ipset list -t` into one line per KUBE-* set with its
// type, revision and creation options ("header KUBE-LOOP-BACK
// hash:ip,port,ip revision 6 family inet ..."): a set another program
// creates with `ipset create -exist` must match all of them.
func setHeaders(list string) []string {
	var out []string
	var name, typ, rev string
	for _, l := range lines(list) {
		k, v, _ := strings.Cut(l, ": ")
		switch k {
		case "Name":
			name = v
		case "Type":
			typ = v
		case "Revision":
			rev = v
		case "Header":
			if strings.HasPrefix(name, "KUBE-") {
				out = append(out, "header "+name+" "+typ+" revision "+rev+" "+initval.ReplaceAllString(v, ""))
			}
		}
	}
	return out
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// hasVirtual reports whether a virtual server ("10.96.0.10:80") exists.
func (s *kernelSnapshot) hasVirtual(addrPort string) bool {
	return slices.ContainsFunc(s.ipvs, func(l string) bool { return strings.HasPrefix(l, "-A") && strings.Contains(l, " "+addrPort+" ") })
}

// kernelState is the part of a snapshot both proxies must agree on.
func (s *kernelSnapshot) kernelState() map[string][]string {
	link := []string{}
	if s.link != "" {
		link = []string{s.link}
	}
	return map[string][]string{"ipvs": s.ipvs, "addr": s.addrs, "link": link, "ipset": s.sets, "sysctl": s.sysctls}
}

func (s *kernelSnapshot) String() string {
	var b strings.Builder
	for _, part := range []struct {
		name  string
		lines []string
	}{{"ipvsadm -Sn", s.ipvs}, {"kube-ipvs0 addresses", s.addrs}, {"kube-ipvs0", []string{s.link}}, {"ipset save", s.sets}, {"sysctls", s.sysctls}} {
		b.WriteString("== " + part.name + "\n" + strings.Join(part.lines, "\n") + "\n")
	}
	b.WriteString("== iptables-save, ip6tables-save\n" + s.iptables + "== nft list ruleset\n" + s.nft)
	return b.String()
}

// waitKernel waits until the proxy reports its first sync, has programmed
// what ready looks for, and the state has stayed the same for two readings
// in a row. The reported sync matters for ipvsplane: its prefills program
// while it still lists, so the kernel can hold a part of the state, and
// hold still, before the first sync completes it.
func waitKernel(t *testing.T, p *kubeProxyProc, timeout time.Duration, ready func(*kernelSnapshot) bool) (*kernelSnapshot, time.Duration) {
	t.Helper()
	start := time.Now()
	var last *kernelSnapshot
	for {
		if p.exited() {
			t.Fatalf("%s exited:\n%s", p.name, p.tail(40))
		}
		synced := reportedSync()
		s := takeSnapshot(t)
		if synced && ready(s) && last != nil && last.String() == s.String() {
			return s, time.Since(start)
		}
		if !synced || !ready(s) {
			s = nil
		}
		last = s
		if time.Since(start) > timeout {
			t.Fatalf("%s: the kernel did not settle within %v; its log:\n%s\nstate:\n%s", p.name, timeout, p.tail(60), takeSnapshot(t))
		}
		time.Sleep(2 * time.Second)
	}
}

// snapshotDiff lists the lines one snapshot has and the other lacks, as
// "<part> kube-proxy-only: <line>" or "<part> ipvsplane-only: <line>".
func snapshotDiff(kubeProxy, ipvsplane *kernelSnapshot) []string {
	var out []string
	a, b := kubeProxy.kernelState(), ipvsplane.kernelState()
	for _, part := range []string{"ipvs", "addr", "link", "ipset", "sysctl"} {
		for _, l := range a[part] {
			if !slices.Contains(b[part], l) {
				out = append(out, part+" kube-proxy-only: "+l)
			}
		}
		for _, l := range b[part] {
			if !slices.Contains(a[part], l) {
				out = append(out, part+" ipvsplane-only: "+l)
			}
		}
	}
	return out
}

// reportedSync reports whether the proxy serving metrics on the tests'
// metricsBindAddress has completed a sync: metricLastSync, which
// kube-proxy exports per IP family and ipvsplane too, is above 0 in every
// sample.
func reportedSync() bool {
	p, err := fetchMetrics(testsMetricsAddr)
	if err != nil {
		return false
	}
	samples := 0
	for k, v := range p {
		if k == metricLastSync || strings.HasPrefix(k, metricLastSync+"{") {
			if v <= 0 {
				return false
			}
			samples++
		}
	}
	return samples > 0
}
