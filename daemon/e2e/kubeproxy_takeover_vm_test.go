//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestKubeProxyTakeover moves a node from kube-proxy (IPVS mode) to
// ipvsplane and back under traffic: long-lived TCP connections to a
// cluster IP and a node port, and a UDP flow to the cluster IP, each
// sending every 50 ms. ipvsplane must adopt kube-proxy's virtual and real
// servers, addresses and sets without deleting or recreating any (the
// real servers' connection counters keep counting, the IPVS connection
// entries stay, the adopting sync issues no deletion), remove kube-proxy's
// iptables chains only after its own rules are in place, and drop no
// connection; `ipvsplane cleanup --handover` then gives the node back to a
// kube-proxy started after it, again without a drop.
func TestKubeProxyTakeover(t *testing.T) {
	e := newKubeProxyEnv(t, "kp-takeover")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	port := func(name string, proto corev1.Protocol, p, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: p, TargetPort: intstr.FromInt32(target)}
	}
	echo := e.create(ctx, t, kubeProxyService{
		svc: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "echo"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
				port("tcp", corev1.ProtocolTCP, 80, 8080), port("udp", corev1.ProtocolUDP, 53, 5353),
			}},
		},
		endpoints: []kubeProxyEndpoint{{1, true}, {2, false}, {3, false}},
	})
	cluster := net.JoinHostPort(echo.Spec.ClusterIP, "80")
	clusterUDP := net.JoinHostPort(echo.Spec.ClusterIP, "53")
	nodePort := net.JoinHostPort("192.168.50.1", strconv.Itoa(int(echo.Spec.Ports[0].NodePort)))

	kp := e.startKubeProxy(t)
	_, took := waitKernel(t, kp, 8*time.Minute, func(s *kernelSnapshot) bool {
		return s.hasVirtual(cluster) && s.hasVirtual(clusterUDP) && s.hasVirtual(nodePort) && strings.Contains(s.iptables, "-A KUBE-POSTROUTING")
	})
	t.Logf("kube-proxy settled in %v", took)

	var flows []*kubeProxyFlow
	for i := range 3 {
		flows = append(flows, startTCPFlow(t, e.clientNS, fmt.Sprintf("cluster-%d", i), cluster))
		flows = append(flows, startTCPFlow(t, e.clientNS, fmt.Sprintf("nodeport-%d", i), nodePort))
	}
	flows = append(flows, startUDPFlow(t, e.clientNS, "udp", clusterUDP))
	// A control: routed straight to a backend, through no service. Its
	// silences are the emulated guest's stalls, which every flow shares.
	flows = append(flows, startTCPFlow(t, e.clientNS, "direct", "10.244.3.2:8080"))
	time.Sleep(2 * time.Second)
	var clients []string
	for _, f := range flows {
		clients = append(clients, f.local)
	}
	connsBefore := ipvsConnections(t, clients)
	statsBefore := realServerStats(t)
	linkBefore := linkIndex(t)
	t.Logf("under kube-proxy: %d IPVS connection entries of the flows, real servers' connection counters %v", len(connsBefore), busy(statsBefore))

	// The takeover: kube-proxy ends as its pod would, ipvsplane starts
	// with the same configuration file.
	for _, f := range flows {
		f.newPhase()
	}
	kp.stop(t)
	plan, err := exec.CommandContext(ctx, "ipvsplane", "plan", "--config="+e.configFile).CombinedOutput()
	if err != nil {
		t.Fatalf("ipvsplane plan: %v\n%s", err, plan)
	}
	t.Logf("ipvsplane plan on kube-proxy's node:\n%s", plan)
	for _, l := range lines(string(plan)) {
		if deletion.MatchString(l) {
			t.Errorf("the takeover plan deletes: %s", l)
		}
	}
	start := time.Now()
	ip := e.startIPVSPlane(t)
	var tookOver time.Duration
	for {
		if ip.exited() {
			t.Fatalf("ipvsplane exited:\n%s", ip.tail(40))
		}
		s := takeSnapshot(t)
		if !strings.Contains(s.iptables, "KUBE-") && strings.Contains(s.nft, "table ip ipvsplane {") {
			tookOver = time.Since(start)
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("kube-proxy's rules still there after 3m:\n%s\n%s", s.iptables, ip.tail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	ops := scrapeOperations(t)
	t.Logf("takeover: kube-proxy's chains gone %v after ipvsplane started; operations %v", tookOver, ops)
	for kind, n := range ops {
		if strings.HasPrefix(kind, "delete_") || kind == "unbind" || kind == "del_entries" {
			t.Errorf("ipvsplane's syncs issued %d %s operations", n, kind)
		}
	}
	if ops["add_virtual"] > 0 || ops["add_real"] > 0 {
		t.Errorf("ipvsplane recreated kube-proxy's servers: %v", ops)
	}
	checkSurvivors(t, "takeover", flows, connsBefore, statsBefore, linkBefore)
	for _, addr := range []string{cluster, nodePort} {
		if err := echoOnce(e.clientNS, addr); err != nil {
			t.Errorf("a new connection to %s after the takeover: %v", addr, err)
		}
	}
	t.Logf("ipvsplane's log:\n%s", ip.tail(30))

	// And back: ipvsplane stops, kube-proxy starts and syncs, and the
	// handover removes ipvsplane's rules and ownership sets only.
	connsBefore, statsBefore = ipvsConnections(t, clients), realServerStats(t)
	for _, f := range flows {
		f.newPhase()
	}
	ip.stop(t)
	kp = e.startKubeProxy(t)
	_, took = waitKernel(t, kp, 8*time.Minute, func(s *kernelSnapshot) bool {
		return strings.Contains(s.iptables, "-A KUBE-POSTROUTING") && strings.Contains(s.iptables, "-A KUBE-IPVS-FILTER")
	})
	if out, err := exec.CommandContext(ctx, "ipvsplane", "cleanup", "--handover", "--state-file=").CombinedOutput(); err != nil {
		t.Fatalf("ipvsplane cleanup --handover: %v\n%s", err, out)
	}
	t.Logf("handover: kube-proxy synced in %v", took)
	after := takeSnapshot(t)
	if strings.Contains(after.nft, "table ip ipvsplane {") || strings.Contains(after.nft, "table ip6 ipvsplane {") || strings.Contains(strings.Join(after.sets, "\n"), "IPVSPLANE") {
		t.Errorf("ipvsplane's rules or sets left after the handover:\n%s", after)
	}
	time.Sleep(3 * time.Second)
	checkSurvivors(t, "handover", flows, connsBefore, statsBefore, linkBefore)
	for _, addr := range []string{cluster, nodePort} {
		if err := echoOnce(e.clientNS, addr); err != nil {
			t.Errorf("a new connection to %s after the handover: %v", addr, err)
		}
	}
	if kp.exited() {
		t.Errorf("kube-proxy exited after the handover:\n%s", kp.tail(40))
	}
	if errs := grepLog(kp, "Failed|failed"); errs != "" {
		t.Errorf("kube-proxy reported failures after the handover:\n%s", errs)
	}
	kp.stop(t)
	for _, f := range flows {
		f.end()
	}
	out, err := exec.CommandContext(ctx, "kube-proxy", "--cleanup", "--config="+e.configFile).CombinedOutput()
	t.Logf("kube-proxy --cleanup: %v\n%s", err, lastLines(string(out), 5))
	removeKubeProxyLeftovers(t, takeSnapshot(t))
}

// deletion matches the plan lines that delete something.
var deletion = regexp.MustCompile(`^(ipvs del|addr unbind|ipset del|conntrack flush)`)

// checkSurvivors checks that every flow is alive and carried traffic
// through the change, that the IPVS connection entries of the flows are
// the same, and that no real server's counter went back (it would, had
// its server been recreated).
func checkSurvivors(t *testing.T, what string, flows []*kubeProxyFlow, connsBefore map[string]string, statsBefore map[string]uint64, link string) {
	t.Helper()
	for _, f := range flows {
		r := f.result()
		t.Logf("%s: flow %s: %d round trips, %d lost, longest silence %v", what, f.name, r.ok, r.lost, r.gap.Round(time.Millisecond))
		if r.err != nil {
			t.Errorf("%s: flow %s dropped: %v", what, f.name, r.err)
		}
		if time.Since(r.last) > flowTimeout {
			t.Errorf("%s: flow %s silent for %v", what, f.name, time.Since(r.last))
		}
		if r.lost > 0 {
			t.Errorf("%s: flow %s lost %d datagrams", what, f.name, r.lost)
		}
	}
	var clients []string
	for c := range connsBefore {
		clients = append(clients, c)
	}
	connsAfter := ipvsConnections(t, clients)
	for c, before := range connsBefore {
		if connsAfter[c] != before {
			t.Errorf("%s: IPVS connection %s became %q", what, before, connsAfter[c])
		}
	}
	statsAfter := realServerStats(t)
	t.Logf("%s: real servers' connection counters %v", what, busy(statsAfter))
	for rs, n := range statsBefore {
		after, ok := statsAfter[rs]
		if !ok || after < n {
			t.Errorf("%s: real server %s: %d connections before, %d (present %v) after: recreated", what, rs, n, after, ok)
		}
	}
	if got := linkIndex(t); got != link {
		t.Errorf("%s: kube-ipvs0 was %s, is %s: recreated", what, link, got)
	}
}

// busy returns the real servers that have had connections.
func busy(stats map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for rs, n := range stats {
		if n > 0 {
			out[rs] = n
		}
	}
	return out
}

// linkIndex returns kube-ipvs0's interface index, which changes if the
// device is recreated.
func linkIndex(t *testing.T) string {
	t.Helper()
	out := runTool(t, "ip", "-o", "link", "show", "dev", "kube-ipvs0")
	return strings.SplitN(out, ":", 2)[0]
}

// scrapeOperations reads ipvsplane_sync_operations_total by kind from the
// daemon's metrics (metricsBindAddress of the configuration).
func scrapeOperations(t *testing.T) map[string]int {
	t.Helper()
	p, err := fetchMetrics(testsMetricsAddr)
	if err != nil {
		t.Fatalf("ipvsplane metrics: %v", err)
	}
	ops := map[string]int{}
	for labels, v := range p.byLabel("ipvsplane_sync_operations_total") {
		_, kind, _ := strings.Cut(labels, "=")
		ops[strings.Trim(kind, `"`)] = int(v)
	}
	return ops
}

// grepLog returns the lines of the program's log that match pattern.
func grepLog(p *kubeProxyProc, pattern string) string {
	re := regexp.MustCompile(pattern)
	var out []string
	for _, l := range strings.Split(p.tail(1000), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
