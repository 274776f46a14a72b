//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/randomcluster"
)

// difftestSeeds are the seeds CI runs: a few minutes in the emulated VM;
// difftestNeighbourSeeds gives some of them neighbours.
// IPVSPLANE_DIFFTEST_SEEDS ("1,2,3") replaces them; make difftest SEEDS=N
// passes N new ones; IPVSPLANE_DIFFTEST_NEIGHBOURS (make difftest
// NEIGHBOURS=1) gives every seed neighbours; IPVSPLANE_DIFFTEST_CASE=FILE
// (make difftest CASE=FILE) runs instead the reproduction a failing seed
// printed, with the neighbours it lists.
var difftestSeeds = []uint64{1, 5}

// difftestServices is how many Services a seed has, unless
// IPVSPLANE_DIFFTEST_SERVICES says.
const difftestServices = 40

// TestKubeProxyDifferential gives kube-proxy v1.37 in IPVS mode and then
// ipvsplane the same random input (internal/randomcluster: the node's
// settings in one KubeProxyConfiguration file, the Node, Services of
// every shape and their EndpointSlices, created through the API server,
// which refuses what is not valid), and compares the kernel state each
// leaves, normalized: virtual servers with scheduler, flags, persistence
// and timeout; real servers with weights; every KUBE-* set's entries and
// options; the addresses on kube-ipvs0; the sysctls. Where the rules
// differ by design (ipvsplane's nftables table, kube-proxy's iptables
// chains) their meaning is compared with packets: the same probes under
// each proxy (probeNet), from a pod, from outside the node in and out of
// the source ranges, and from the node, to every service address, node
// port and health-check port. A difference fails the test unless
// difftestExclusions names it with the row of
// docs/differences-from-kube-proxy.md that explains it (a probe's
// difference is explained by the explained difference of its Service's
// kernel state); a failing seed prints the Services involved as YAML,
// which reproduces it.
func TestKubeProxyDifferential(t *testing.T) {
	seeds := difftestSeedList(t, difftestSeeds)
	n := difftestServiceCount(t)
	env := randomcluster.DefaultEnv()
	e := newDifftestNode(t, env)

	total := &difftestTally{groups: map[string]int{}}
	if file := os.Getenv("IPVSPLANE_DIFFTEST_CASE"); file != "" {
		// A reproduction a failing run printed, saved to a file.
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		c, err := randomcluster.ParseYAML(data, env)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Run("case="+filepath.Base(file), func(t *testing.T) { runDifftestSeed(t, e, c, total) })
		seeds = nil
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c := randomcluster.Generate(seed, env, n)
			if kinds := difftestNeighbours(t, seed); len(kinds) > 0 {
				c.AddNeighbours(kinds)
			}
			runDifftestSeed(t, e, c, total)
		})
	}
	t.Logf("%d seeds: %d Services generated, %d created (the rest refused by the API server), %d difference lines; %d probes under each proxy, %d outcomes differ",
		len(seeds), total.generated, total.created, total.lines, total.probes, total.probeLines)
	for _, g := range slices.Sorted(maps.Keys(total.groups)) {
		t.Logf("  %4d  %s", total.groups[g], g)
	}
}

// difftestServiceCount is how many Services a seed has: difftestServices,
// or IPVSPLANE_DIFFTEST_SERVICES.
func difftestServiceCount(t *testing.T) int {
	t.Helper()
	s := os.Getenv("IPVSPLANE_DIFFTEST_SERVICES")
	if s == "" {
		return difftestServices
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("IPVSPLANE_DIFFTEST_SERVICES=%q: want a positive number", s)
	}
	return n
}

// newDifftestNode is the node of a differential test: the node's IPv6
// InternalIP beside its IPv4 one, and the Node object of env.
func newDifftestNode(t *testing.T, env randomcluster.Env) *kubeProxyEnv {
	t.Helper()
	e := newKubeProxyNode(t)
	// nodad, as nothing else claims it.
	for _, f := range []corev1.IPFamily{corev1.IPv6Protocol} {
		addr := fmt.Sprintf("%s/%d", env.NodeIPs[f], env.NodeNet[f].Bits())
		rootIP(t, "addr", "add", addr, "dev", "eth0", "nodad")
		t.Cleanup(func() { exec.Command("ip", "addr", "del", addr, "dev", "eth0").Run() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.createNode(ctx, t, randomcluster.Generate(0, env, 0).Node)
	return e
}

// difftestOwnConfig is the part of a differential test's
// KubeProxyConfiguration that is the test's own.
func difftestOwnConfig(c *randomcluster.Cluster, e *kubeProxyEnv) string {
	return fmt.Sprintf(`hostnameOverride: %s
clientConnection:
  kubeconfig: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
ipvs:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, c.Env.NodeName, e.kubeconfig)
}

// difftestTally counts, across seeds, the cases run and the differences
// found, by exclusion (or "unexplained").
type difftestTally struct {
	generated, created, lines int
	probes, probeLines        int
	groups                    map[string]int
}

// runDifftestSeed runs both proxies on one seed's cluster and compares.
func runDifftestSeed(t *testing.T, e *kubeProxyEnv, c *randomcluster.Cluster, total *difftestTally) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	own := difftestOwnConfig(c, e)
	// Registered before the proxies start, so it runs after they stopped:
	// the next seed starts from a clean node even when this one failed.
	t.Cleanup(func() {
		if out, err := exec.Command("ipvsplane", "cleanup", "--state-file=").CombinedOutput(); err != nil {
			t.Errorf("ipvsplane cleanup: %v\n%s", err, out)
		}
		if c.Neighbours != nil {
			removeNeighbours(t)
		}
		removeKubeProxyLeftovers(t, takeSnapshot(t))
		resetProxySysctls(t)
	})
	config, err := c.ConfigYAML([]byte(own))
	if err != nil {
		t.Fatal(err)
	}
	e.writeConfig(t, string(config))
	t.Logf("configuration:\n%s", config)
	t.Logf("neighbours: %s", describeNeighbours(c.Neighbours))
	e.createNamespace(t, fmt.Sprintf("kp-diff-%d", c.Seed))
	created := createRandomCluster(ctx, t, e, c)
	total.generated += len(c.Services)
	total.created += len(created.services)
	waitFor := created.readyCheck()
	// Before the proxies start, so that both see the same node addresses.
	pn := newProbeNet(t, c.Env, c.Config)
	probes := pn.probes(created)
	if c.Neighbours != nil {
		pn.serveNeighbours(t)
		probes = append(probes, pn.neighbourProbes(c.Neighbours)...)
		installNeighbours(t, c, created)
	}

	resetProxySysctls(t)
	kp := e.startKubeProxy(t)
	kpState, took := waitKernel(t, kp, 10*time.Minute, func(s *kernelSnapshot) bool {
		return waitFor(s) && strings.Contains(s.iptables, "-A KUBE-SERVICES")
	})
	t.Logf("kube-proxy settled in %v", took)
	kpProbes := pn.run(t, probes)
	t.Logf("kube-proxy: %d probes: %s", len(kpProbes), probeSummary(kpProbes))
	kp.stop(t)
	e.cleanupKubeProxy(ctx, t)
	if c.Neighbours != nil {
		installNeighbours(t, c, created)
	}

	ip := e.startIPVSPlane(t)
	ipState, took := waitKernel(t, ip, 5*time.Minute, func(s *kernelSnapshot) bool {
		return waitFor(s) && strings.Contains(s.nft, "table ip ipvsplane {")
	})
	t.Logf("ipvsplane settled in %v", took)
	ipProbes := pn.run(t, probes)
	t.Logf("ipvsplane: %d probes: %s", len(ipProbes), probeSummary(ipProbes))
	ip.stop(t)
	for _, p := range []*kubeProxyProc{kp, ip} {
		t.Logf("%s's warnings and errors:\n%s", p.name, p.grep(`(?i)warn|error|"level":"(warn|error)"|^[WE][0-9]{4} `))
	}

	diff := snapshotDiff(kpState, ipState)
	total.lines += len(diff)
	involved := map[string]bool{}
	// explained holds, per Service, the exclusion that explained a
	// difference of its kernel state: its probes may differ by it.
	explained := map[string]string{}
	for _, d := range diff {
		names := created.servicesIn(d)
		ex := explainDifference(newDifftestLine(d, names, created, c, kpState, ipState))
		group := "unexplained"
		if ex != nil {
			group = ex.name
		}
		total.groups[group]++
		if ex == nil {
			t.Errorf("unexplained difference: %s (services %s)", d, strings.Join(names, ","))
			for _, n := range names {
				involved[n] = true
			}
			continue
		}
		for _, n := range names {
			if !ex.stateOnly {
				explained[n] = ex.name
			}
		}
		t.Logf("%s: %s (services %s)", ex.name, d, strings.Join(names, ","))
	}
	total.probes += len(probes)
	for _, d := range probeDiff(probes, kpProbes, ipProbes) {
		total.probeLines++
		name := d.probe.service
		group := "unexplained probes"
		if ex, ok := explained[name]; ok {
			group = "probes: " + ex
			t.Logf("follows from %s: %s (service %s)", ex, d, name)
		} else if svc := created.services[name]; svc == nil {
			// A neighbour's own port: the Services it names reproduce it.
			t.Errorf("unexplained probe difference: %s (%s)", d, name)
			for _, n := range c.Neighbours.Services() {
				involved[n] = true
			}
		} else if ex := explainProbe(d.probe, svc, d.kp, d.ip, c.Neighbours); ex != nil {
			group = "probes: " + ex.name
			t.Logf("%s: %s (service %s)", ex.name, d, name)
		} else {
			t.Errorf("unexplained probe difference: %s (service %s)", d, name)
			involved[name] = true
		}
		total.groups[group]++
	}
	if len(involved) > 0 {
		names := slices.Sorted(maps.Keys(involved))
		repro, err := c.YAML(names...)
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("seed %d differs for %s; as the API server stored them:\n%s\nreproduction:\n%s",
			c.Seed, strings.Join(names, ","), created.describe(names), repro)
	}
}

// createdCluster is what the API server accepted of a generated cluster,
// as it stored it (cluster IPs and node ports allocated).
type createdCluster struct {
	services map[string]*corev1.Service
	// generated are the generator's Services by name, with their slices
	// as far as the API server accepted them.
	generated map[string]*randomcluster.Service
	order     []string
}

// createRandomCluster creates the cluster's Services, their load-balancer
// status and their EndpointSlices; what the API server refuses is logged
// and left out.
func createRandomCluster(ctx context.Context, t *testing.T, e *kubeProxyEnv, c *randomcluster.Cluster) *createdCluster {
	t.Helper()
	out := &createdCluster{services: map[string]*corev1.Service{}, generated: map[string]*randomcluster.Service{}}
	svcs := e.client.CoreV1().Services(e.namespace)
	refused := 0
	for _, g := range c.Services {
		spec := g.Service.DeepCopy()
		spec.Status = corev1.ServiceStatus{}
		svc, err := svcs.Create(ctx, spec, metav1.CreateOptions{})
		if err != nil {
			t.Logf("the API server refused Service %s: %v", g.Service.Name, err)
			refused++
			continue
		}
		if len(g.Service.Status.LoadBalancer.Ingress) > 0 {
			svc.Status = g.Service.Status
			if updated, err := svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
				t.Logf("the API server refused the load-balancer status of %s: %v", svc.Name, err)
				g.Service.Status = corev1.ServiceStatus{}
			} else {
				svc = updated
			}
		}
		kept := g.Slices[:0:0]
		for _, sl := range g.Slices {
			if _, err := e.client.DiscoveryV1().EndpointSlices(e.namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Logf("the API server refused EndpointSlice %s: %v", sl.Name, err)
				continue
			}
			kept = append(kept, sl)
		}
		g.Slices = kept
		out.services[svc.Name], out.generated[svc.Name] = svc, g
		out.order = append(out.order, svc.Name)
	}
	t.Logf("%d Services created, %d refused", len(out.services), refused)
	for _, name := range out.order {
		t.Logf("%s: %s %s", name, out.describe([]string{name}), strings.Join(out.generated[name].Shapes(), " "))
	}
	return out
}

// proxied reports whether kube-proxy serves the Service at all.
func proxied(svc *corev1.Service) bool {
	_, other := svc.Labels[randomcluster.LabelServiceProxyName]
	return !other && svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.Type != corev1.ServiceTypeExternalName
}

// readyCheck returns what a proxy's first complete sync has: the virtual
// server of the last Service's first cluster IP and port (the proxies
// sync once they have read every Service), of a Service without labels,
// which any proxy programs.
func (c *createdCluster) readyCheck() func(*kernelSnapshot) bool {
	for _, name := range slices.Backward(c.order) {
		if svc := c.services[name]; proxied(svc) && len(svc.Labels) == 0 {
			vs := joinHostPort(svc.Spec.ClusterIPs[0], svc.Spec.Ports[0].Port)
			return func(s *kernelSnapshot) bool { return s.hasVirtual(vs) }
		}
	}
	return func(*kernelSnapshot) bool { return true }
}

func joinHostPort(ip string, port int32) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(int(port))
	}
	return ip + ":" + strconv.Itoa(int(port))
}

// describe says what the API server gave the Services: cluster IPs,
// node ports, health-check node port, load-balancer IPs.
func (c *createdCluster) describe(names []string) string {
	var b strings.Builder
	for _, name := range names {
		svc := c.services[name]
		if svc == nil {
			continue
		}
		fmt.Fprintf(&b, "%s clusterIPs=%v", name, svc.Spec.ClusterIPs)
		for _, p := range svc.Spec.Ports {
			fmt.Fprintf(&b, " %s/%d", p.Protocol, p.Port)
			if p.NodePort != 0 {
				fmt.Fprintf(&b, "(node %d)", p.NodePort)
			}
		}
		if svc.Spec.HealthCheckNodePort != 0 {
			fmt.Fprintf(&b, " healthCheck=%d", svc.Spec.HealthCheckNodePort)
		}
		if len(svc.Spec.ExternalIPs) > 0 {
			fmt.Fprintf(&b, " externalIPs=%v", svc.Spec.ExternalIPs)
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			fmt.Fprintf(&b, " ingress=%s%s", in.IP, in.Hostname)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// servicesIn names the Services a difference line is about: those whose
// addresses (cluster, external, load-balancer) with one of their ports,
// or whose node ports, or whose endpoint addresses appear in it.
func (c *createdCluster) servicesIn(line string) []string {
	var out []string
	for _, name := range c.order {
		svc := c.services[name]
		if c.mentions(line, svc) {
			out = append(out, name)
		}
	}
	return out
}

func (c *createdCluster) mentions(line string, svc *corev1.Service) bool {
	addrs := slices.Clone(svc.Spec.ClusterIPs)
	addrs = append(addrs, svc.Spec.ExternalIPs...)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			addrs = append(addrs, in.IP)
		}
	}
	for _, a := range addrs {
		if a == "None" || a == "" {
			continue
		}
		if strings.Contains(line, " "+a+"/") || strings.HasSuffix(line, " "+a) {
			return true // an address on kube-ipvs0, an entry of KUBE-IPVS-IPS
		}
		for _, p := range svc.Spec.Ports {
			port := strconv.Itoa(int(p.Port))
			proto := strings.ToLower(string(p.Protocol))
			// ipvsadm's "10.96.0.10:80", "[fd00::1]:80"; ipset's
			// "10.96.0.10,tcp:80".
			if strings.Contains(line, " "+joinHostPort(a, p.Port)+" ") || strings.Contains(line, " "+a+","+proto+":"+port) {
				return true
			}
		}
	}
	f := strings.Fields(line)
	for _, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		np := strconv.Itoa(int(p.NodePort))
		// A node port's virtual servers (":30001 ") and its sets' entries.
		if strings.Contains(line, ":"+np+" ") || strings.HasSuffix(line, ":"+np) || (len(f) > 0 && f[len(f)-1] == np) {
			return true
		}
	}
	if hc := svc.Spec.HealthCheckNodePort; hc != 0 && strings.Contains(line, strconv.Itoa(int(hc))) {
		return true
	}
	// A KUBE-LOOP-BACK entry: one of its endpoints, with its port.
	for _, sl := range c.generated[svc.Name].Slices {
		for _, p := range sl.Ports {
			if p.Port == nil || p.Protocol == nil {
				continue
			}
			port := strings.ToLower(string(*p.Protocol)) + ":" + strconv.Itoa(int(*p.Port))
			for _, ep := range sl.Endpoints {
				if strings.Contains(line, " "+ep.Addresses[0]+","+port+",") {
					return true
				}
			}
		}
	}
	return false
}
