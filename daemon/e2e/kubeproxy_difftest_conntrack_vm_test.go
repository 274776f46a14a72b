//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/randomcluster"
	"github.com/ipvsplane/ipvsplane/inet"
)

// conntrackRounds is how many rounds of endpoint changes a seed makes
// under each proxy, after its start.
const conntrackRounds = 4

// conntrackSeeds are the seeds CI runs, a few minutes in the emulated VM;
// difftest's knobs replace them (make difftest runs this test too).
var conntrackSeeds = []uint64{3}

// TestKubeProxyConntrackDifferential compares the conntrack flows kube-proxy
// v1.37 in IPVS mode and ipvsplane leave, on the same random cluster
// (internal/randomcluster) and the same changes. For each proxy in turn,
// from the same API state: flows are put in the table (conntrack.Create,
// no traffic) to every proxied Service's addresses and node ports (on the
// node's IPs and on another address), answered by its endpoints of every
// condition, by endpoints the round removes or adds, by an address that
// never was one and by an endpoint on another port; the proxy starts (its
// first sync reconciles), and then each round puts fresh flows in, changes
// some Services' EndpointSlices (endpoints removed, added, their
// conditions or port changed, a slice deleted) and waits until the proxy
// synced the change; the flows left after the start and after each round
// are compared. A test Service's flow that the last change of a round
// makes stale (a canary) tells that the proxy's reconciliation of that
// family ran; the round's other family is reconciled only if the round's
// changes call for it. A difference fails the test unless
// conntrackExclusions names it with the row of
// docs/differences-from-kube-proxy.md that explains it. Seeds and the
// number of Services come from difftest's knobs (IPVSPLANE_DIFFTEST_SEEDS,
// IPVSPLANE_DIFFTEST_SERVICES, make difftest).
func TestKubeProxyConntrackDifferential(t *testing.T) {
	seeds := difftestSeedList(t, conntrackSeeds)
	n := difftestServiceCount(t)
	env := randomcluster.DefaultEnv()
	e := newDifftestNode(t, env)
	raiseConntrackMax(t, 1<<18)
	total := &conntrackTally{groups: map[string]int{}}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runConntrackSeed(t, e, randomcluster.Generate(seed, env, n), total)
		})
	}
	t.Logf("%d seeds: %d endpoint changes, %d flow cases (flows compared after a start or a round), kube-proxy deleted %d and kept %d; %d differ",
		len(seeds), total.changes, total.cases, total.deleted, total.cases-total.deleted, total.differ)
	for _, g := range slices.Sorted(maps.Keys(total.groups)) {
		t.Logf("  %5d  %s", total.groups[g], g)
	}
}

// conntrackTally counts, across seeds, the cases compared and the
// differences, by exclusion (or "unexplained").
type conntrackTally struct {
	changes, cases, deleted, differ int
	groups                          map[string]int
}

// slicesState is every Service's EndpointSlices at one point of a seed,
// by slice name.
type slicesState map[string]*discoveryv1.EndpointSlice

// conntrackPhase is the start (index 0) or a round: the slices the API
// server holds before and after it, and the flows put in before it.
type conntrackPhase struct {
	before, after slicesState
	flows         []conntrack.Flow
	// changes counts the slices the round changed.
	changes int
}

func runConntrackSeed(t *testing.T, e *kubeProxyEnv, c *randomcluster.Cluster, total *conntrackTally) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if out, err := exec.Command("ipvsplane", "cleanup", "--state-file=").CombinedOutput(); err != nil {
			t.Errorf("ipvsplane cleanup: %v\n%s", err, out)
		}
		removeKubeProxyLeftovers(t, takeSnapshot(t))
		resetProxySysctls(t)
	})
	config, err := c.ConfigYAML([]byte(difftestOwnConfig(c, e)))
	if err != nil {
		t.Fatal(err)
	}
	e.writeConfig(t, string(config))
	e.createNamespace(t, fmt.Sprintf("kp-ct-%d", c.Seed))
	created := createRandomCluster(ctx, t, e, c)
	m := createCanaryService(ctx, t, e, c.Env)
	phases := conntrackPhases(c, created)
	ct, err := conntrack.Dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	for _, ph := range phases[1:] {
		total.changes += ph.changes
	}

	left := map[string][]map[string]bool{}
	for i, proxy := range []string{"kube-proxy", "ipvsplane"} {
		if i > 0 {
			// Back to the start for the next proxy, stopped.
			applySlices(ctx, t, e, phases[len(phases)-1].after, phases[0].before)
			m.reset(ctx, t, e)
		}
		left[proxy] = runConntrackProxy(ctx, t, e, proxy, ct, m, phases)
	}
	for i, ph := range phases {
		compareFlows(t, i, ph, created, left["kube-proxy"][i], left["ipvsplane"][i], total)
	}
}

// runConntrackProxy starts proxy on the first phase's flows, runs the
// rounds, stops it, and returns the injected flows left after each phase.
func runConntrackProxy(ctx context.Context, t *testing.T, e *kubeProxyEnv, proxy string, ct *conntrack.Conn, m *canaryService, phases []conntrackPhase) []map[string]bool {
	var out []map[string]bool
	for i, ph := range phases {
		if err := ct.Flush(ctx, 0); err != nil {
			t.Fatal(err)
		}
		canaries := m.flows(i)
		if err := ct.Create(ctx, slices.Concat(ph.flows, canaries)...); err != nil {
			t.Fatalf("%s, phase %d: putting %d flows in: %v", proxy, i, len(ph.flows), err)
		}
		var p *kubeProxyProc
		if i == 0 {
			resetProxySysctls(t)
			if proxy == "kube-proxy" {
				p = e.startKubeProxy(t)
			} else {
				p = e.startIPVSPlane(t)
			}
			defer func() {
				p.stop(t)
				if proxy == "kube-proxy" {
					e.cleanupKubeProxy(ctx, t)
				}
			}()
		}
		start := time.Now()
		runs := reconcilerRuns()
		synced := m.env.Families()
		if i > 0 {
			applySlices(ctx, t, e, ph.before, ph.after)
			m.step(ctx, t, e, i)
			synced = changedFamilies(ph, m.phaseFamily(i))
		}
		waitCanaries(ctx, t, ct, canaries[:m.stale(i)], proxy)
		waitSynced(t, start, proxy, synced)
		out = append(out, settledFlows(ctx, t, ct, ph.flows))
		after := reconcilerRuns()
		t.Logf("%s, phase %d: %d flows put in, %d left, synced in %v; reconciliations IPv4 %v, IPv6 %v", proxy, i, len(ph.flows), len(out[i]),
			time.Since(start).Round(time.Millisecond), after[corev1.IPv4Protocol]-runs[corev1.IPv4Protocol], after[corev1.IPv6Protocol]-runs[corev1.IPv6Protocol])
	}
	return out
}

// conntrackPhases plans a seed: the start, then conntrackRounds rounds of
// changes to the Services' slices, each with its flows.
func conntrackPhases(c *randomcluster.Cluster, created *createdCluster) []conntrackPhase {
	rnd := rand.New(rand.NewPCG(c.Seed, 0x636f6e6e747261))
	state := slicesState{}
	for _, name := range created.order {
		for _, sl := range created.generated[name].Slices {
			state[sl.Name] = sl
		}
	}
	phases := []conntrackPhase{{before: state, after: state}}
	for range conntrackRounds {
		next, n := changeSlices(rnd, c.Env, created, state)
		phases = append(phases, conntrackPhase{before: state, after: next, changes: n})
		state = next
	}
	for i := range phases {
		phases[i].flows = phaseFlows(rnd, c.Env, created, phases[i])
	}
	return phases
}

// changeSlices returns state with some Services' slices changed, and how
// many changed.
func changeSlices(rnd *rand.Rand, env randomcluster.Env, created *createdCluster, state slicesState) (slicesState, int) {
	next := maps.Clone(state)
	n := 0
	for _, name := range slices.Sorted(maps.Keys(state)) {
		if rnd.Float64() >= 0.3 {
			continue
		}
		sl := state[name].DeepCopy()
		n++
		switch eps := sl.Endpoints; rnd.IntN(6) {
		case 0:
			delete(next, name)
			continue
		case 1:
			if len(eps) > 0 {
				i := rnd.IntN(len(eps))
				sl.Endpoints = slices.Delete(eps, i, i+1)
			}
		case 2:
			fam := corev1.IPFamily(sl.AddressType)
			local := rnd.IntN(2) == 0
			addrs := env.PodAddrs(local)[fam]
			node := env.RemoteNode
			if local {
				node = env.NodeName
			}
			sl.Endpoints = append(eps, discoveryv1.Endpoint{Addresses: []string{addrs[rnd.IntN(len(addrs))].String()}, NodeName: &node})
		case 3:
			for i := range sl.Ports {
				if sl.Ports[i].Port != nil {
					p := *sl.Ports[i].Port + 1
					sl.Ports[i].Port = &p
				}
			}
		default:
			for i := range eps {
				if rnd.IntN(2) == 0 {
					c := &eps[i].Conditions
					c.Ready, c.Serving, c.Terminating = randomcluster.Condition(rnd), randomcluster.Condition(rnd), randomcluster.Condition(rnd)
				}
			}
		}
		next[name] = sl
	}
	return next, n
}

// phaseFlows returns the flows a phase puts in: to each proxied Service
// port's cluster, external and load-balancer addresses and its node port
// (on the node's IP and on another address), answered by each endpoint of
// that port in the slices before or after the phase, by an address that
// never was an endpoint, and by an endpoint's address on another port.
// Each comes from its own client port. A flow whose fate depends on
// whether a proxy reconciles between two of the round's writes is left
// out: one answered by an endpoint the round makes serving (stale until
// then), or to a node port the round leaves without a serving endpoint
// (matched until then), or whose having one is chance, before or after
// the round (an endpoint listed twice, one copy serving: which copy a
// proxy keeps is chance, docs/differences-from-kube-proxy.md).
func phaseFlows(rnd *rand.Rand, env randomcluster.Env, created *createdCluster, ph conntrackPhase) []conntrack.Flow {
	var flows []conntrack.Flow
	port := new(uint16(1024))
	for _, name := range created.order {
		svc := created.services[name]
		if !proxied(svc) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			for _, fam := range env.Families() {
				before, after := endpointsServing(ph.before, name, sp, fam), endpointsServing(ph.after, name, sp, fam)
				var sources []netip.AddrPort
				for _, ep := range slices.SortedFunc(maps.Keys(mergedKeys(before, after)), netip.AddrPort.Compare) {
					if before[ep] || !after[ep] {
						sources = append(sources, ep)
					}
				}
				never := netip.AddrPortFrom(neverEndpoint(env, fam), 5353)
				sources = append(sources, never)
				if len(sources) > 1 {
					s := sources[rnd.IntN(len(sources)-1)]
					sources = append(sources, netip.AddrPortFrom(s.Addr(), s.Port()+7))
				}
				dsts := frontends(env, svc, sp, fam)
				if leavesNoServing(before, after) || servingByChance(ph.before, name, sp, fam) || servingByChance(ph.after, name, sp, fam) {
					dsts = slices.DeleteFunc(dsts, func(d netip.AddrPort) bool { return d.Port() == uint16(sp.NodePort) })
				}
				for _, dst := range dsts {
					for _, src := range sources {
						flows = append(flows, injectedFlow(env, fam, sp.Protocol, dst, src, port))
					}
				}
			}
		}
	}
	return flows
}

// endpointsServing returns the endpoints of service port sp of family fam
// that the slices of a state list, and whether a copy of each is serving.
// Slices labelled headless are left out, as both proxies leave them.
func endpointsServing(state slicesState, svc string, sp corev1.ServicePort, fam corev1.IPFamily) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for k, serving := range portEndpoints(state, svc, sp, fam) {
		out[k] = out[k] || serving
	}
	return out
}

// portEndpoints yields each copy of each endpoint of service port sp of
// family fam that the slices of a state list, and whether it is serving.
// Slices labelled headless are left out, as both proxies leave them.
func portEndpoints(state slicesState, svc string, sp corev1.ServicePort, fam corev1.IPFamily) iter.Seq2[netip.AddrPort, bool] {
	return func(yield func(netip.AddrPort, bool) bool) {
		for _, sl := range state {
			if _, headless := sl.Labels[randomcluster.LabelHeadless]; headless || sl.Labels[discoveryv1.LabelServiceName] != svc || string(sl.AddressType) != string(fam) {
				continue
			}
			for _, p := range sl.Ports {
				if p.Port == nil || p.Name == nil || *p.Name != sp.Name || p.Protocol == nil || *p.Protocol != sp.Protocol {
					continue
				}
				for _, ep := range sl.Endpoints {
					if !yield(netip.AddrPortFrom(netip.MustParseAddr(ep.Addresses[0]), uint16(*p.Port)), ep.Conditions.Serving == nil || *ep.Conditions.Serving) {
						return
					}
				}
			}
		}
	}
}

// leavesNoServing reports whether a port with a serving endpoint before
// a round has none after it.
func leavesNoServing(before, after map[netip.AddrPort]bool) bool {
	return slices.Contains(slices.Collect(maps.Values(before)), true) && !slices.Contains(slices.Collect(maps.Values(after)), true)
}

// servingByChance reports whether, in a state, whether service port sp
// of family fam has a serving endpoint depends on which copy of an
// endpoint listed twice a proxy keeps: every serving endpoint has a copy
// that is not.
func servingByChance(state slicesState, svc string, sp corev1.ServicePort, fam corev1.IPFamily) bool {
	copies := map[netip.AddrPort][2]bool{}
	for k, serving := range portEndpoints(state, svc, sp, fam) {
		c := copies[k]
		if serving {
			c[1] = true
		} else {
			c[0] = true
		}
		copies[k] = c
	}
	surely, maybe := false, false
	for _, c := range copies {
		surely = surely || (c[1] && !c[0])
		maybe = maybe || (c[1] && c[0])
	}
	return maybe && !surely
}

// mergedKeys is the union of two maps' keys.
func mergedKeys[K comparable, V any](a, b map[K]V) map[K]bool {
	out := map[K]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// neverEndpoint is a pod address no slice names.
func neverEndpoint(env randomcluster.Env, fam corev1.IPFamily) netip.Addr {
	p := env.RemotePodCIDRs[fam]
	b := p.Addr().AsSlice()
	b[len(b)-1] = 250
	a, _ := netip.AddrFromSlice(b)
	return a
}

// frontends are the destinations of a service port's flows in a family:
// its cluster, external and load-balancer addresses with its port, and
// its node port on the node's IP and on an address not the node's.
func frontends(env randomcluster.Env, svc *corev1.Service, sp corev1.ServicePort, fam corev1.IPFamily) []netip.AddrPort {
	addrs := slices.Concat(svc.Spec.ClusterIPs, svc.Spec.ExternalIPs)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		addrs = append(addrs, in.IP)
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && (ip.Is6() == (fam == corev1.IPv6Protocol)) {
			out = append(out, netip.AddrPortFrom(ip, uint16(sp.Port)))
		}
	}
	if sp.NodePort != 0 {
		other := env.SourceNet[fam].Addr().Next().Next()
		out = append(out, netip.AddrPortFrom(env.NodeIPs[fam], uint16(sp.NodePort)), netip.AddrPortFrom(other, uint16(sp.NodePort)))
	}
	return out
}

// injectedFlow is a flow of proto from the test's client to dst, answered
// by src, from the next client port; the client is an address of the
// source ranges (203.0.113.1, 2001:db8:5::1).
func injectedFlow(env randomcluster.Env, fam corev1.IPFamily, protocol corev1.Protocol, dst, src netip.AddrPort, port *uint16) conntrack.Flow {
	*port++
	proto := map[corev1.Protocol]inet.Protocol{corev1.ProtocolTCP: inet.TCP, corev1.ProtocolUDP: inet.UDP, corev1.ProtocolSCTP: inet.SCTP}[protocol]
	client := env.SourceNet[fam].Addr().Next()
	return conntrack.Flow{
		Orig:    conntrack.Tuple{Src: client, Dst: dst.Addr(), Protocol: proto, SrcPort: *port, DstPort: dst.Port()},
		Reply:   conntrack.Tuple{Src: src.Addr(), Dst: client, Protocol: proto, SrcPort: src.Port(), DstPort: *port},
		Timeout: 30 * time.Minute,
	}
}

// flowKey names a flow by its original tuple and its reply's source.
func flowKey(f conntrack.Flow) string {
	return fmt.Sprintf("%s answered by %s", f.Orig, netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort))
}

// tracked returns the keys of the flows in the table.
func tracked(ctx context.Context, t *testing.T, ct *conntrack.Conn) map[string]bool {
	t.Helper()
	all, err := ct.Dump(ctx, conntrack.All())
	if err != nil {
		t.Fatal(err)
	}
	have := make(map[string]bool, len(all))
	for _, f := range all {
		have[flowKey(f)] = true
	}
	return have
}

// settledFlows waits until the table stops changing and returns which of
// flows are left in it.
func settledFlows(ctx context.Context, t *testing.T, ct *conntrack.Conn, flows []conntrack.Flow) map[string]bool {
	t.Helper()
	var last map[string]bool
	stable := 0
	for {
		have := tracked(ctx, t, ct)
		left := map[string]bool{}
		for _, f := range flows {
			if k := flowKey(f); have[k] {
				left[k] = true
			}
		}
		if same := last != nil && maps.Equal(last, left); same && stable >= 1 {
			return left
		} else if same {
			stable++
		} else {
			stable = 0
		}
		last = left
		time.Sleep(3 * time.Second)
	}
}

// waitCanaries waits until the canaries are gone: the proxy reconciled
// their family after the phase's last change.
func waitCanaries(ctx context.Context, t *testing.T, ct *conntrack.Conn, canaries []conntrack.Flow, proxy string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		have := tracked(ctx, t, ct)
		if !slices.ContainsFunc(canaries, func(f conntrack.Flow) bool { return have[flowKey(f)] }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the canary flows %v are still there after 5 minutes", proxy, canaries)
		}
		time.Sleep(time.Second)
	}
}

// changedFamilies are the families whose slices a round changes, and
// the canary's family: those whose proxier (kube-proxy runs one per
// family) syncs after the round. Slices labelled headless are not
// watched.
func changedFamilies(ph conntrackPhase, canary corev1.IPFamily) []corev1.IPFamily {
	fams := []corev1.IPFamily{canary}
	for name := range maps.Keys(ph.before) {
		sl := ph.before[name]
		if _, headless := sl.Labels[randomcluster.LabelHeadless]; headless {
			continue
		}
		if !reflect.DeepEqual(sl, ph.after[name]) && !slices.Contains(fams, corev1.IPFamily(sl.AddressType)) {
			fams = append(fams, corev1.IPFamily(sl.AddressType))
		}
	}
	return fams
}

// reconcilerRuns reads the running proxy's count of conntrack
// reconciliations per family (kubeproxy_conntrack_reconciler_sync_duration_seconds,
// which both export).
func reconcilerRuns() map[corev1.IPFamily]float64 {
	out := map[corev1.IPFamily]float64{}
	p, err := fetchMetrics(testsMetricsAddr)
	if err != nil {
		return out
	}
	for labels, v := range p.byLabel("kubeproxy_conntrack_reconciler_sync_duration_seconds_count") {
		for _, f := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
			if labels == fmt.Sprintf("ip_family=%q", f) {
				out[f] = v
			}
		}
	}
	return out
}

// waitSynced waits until the proxy synced each of fams after since.
func waitSynced(t *testing.T, since time.Time, proxy string, fams []corev1.IPFamily) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		p, err := fetchMetrics(testsMetricsAddr)
		if err == nil {
			synced := p.byLabel(metricLastSync)
			if !slices.ContainsFunc(fams, func(f corev1.IPFamily) bool {
				return synced[fmt.Sprintf("ip_family=%q", f)] < float64(since.UnixNano())/1e9
			}) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not sync %v within 5 minutes (%v)", proxy, fams, err)
		}
		time.Sleep(time.Second)
	}
}

// applySlices changes the API server's slices from one state to another.
func applySlices(ctx context.Context, t *testing.T, e *kubeProxyEnv, from, to slicesState) {
	t.Helper()
	api := e.client.DiscoveryV1().EndpointSlices(e.namespace)
	for _, name := range slices.Sorted(maps.Keys(to)) {
		want, had := to[name], from[name]
		switch {
		case had == nil:
			sl := want.DeepCopy()
			sl.ResourceVersion = ""
			if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating EndpointSlice %s: %v", name, err)
			}
		case !reflect.DeepEqual(had.Endpoints, want.Endpoints) || !reflect.DeepEqual(had.Ports, want.Ports):
			sl, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sl.Endpoints, sl.Ports = want.Endpoints, want.Ports
			if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("updating EndpointSlice %s: %v", name, err)
			}
		}
	}
	for name := range from {
		if to[name] == nil {
			if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting EndpointSlice %s: %v", name, err)
			}
		}
	}
}

// canaryService is the test's own dual-stack UDP Service: its flows,
// answered by an endpoint that a phase's last change removes, tell when
// a proxy reconciled that family after the change.
type canaryService struct {
	clusterIPs map[corev1.IPFamily]netip.Addr
	env        randomcluster.Env
	// endpoint is the current endpoint's number, per family.
	endpoint map[corev1.IPFamily]int
}

const canaryName = "ct-canary"

func createCanaryService(ctx context.Context, t *testing.T, e *kubeProxyEnv, env randomcluster.Env) *canaryService {
	t.Helper()
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc, err := e.client.CoreV1().Services(e.namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: canaryName},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: &policy, IPFamilies: env.Families(),
			Ports: []corev1.ServicePort{{Name: "canary", Protocol: corev1.ProtocolUDP, Port: 7, TargetPort: intstr.FromInt32(7)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := &canaryService{clusterIPs: map[corev1.IPFamily]netip.Addr{}, env: env, endpoint: map[corev1.IPFamily]int{}}
	for _, ip := range svc.Spec.ClusterIPs {
		a := netip.MustParseAddr(ip)
		m.clusterIPs[familyOf(a)] = a
	}
	for _, fam := range env.Families() {
		sl := m.slice(fam)
		if _, err := e.client.DiscoveryV1().EndpointSlices(e.namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Is6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// addr is the canary's endpoint number n in a family.
func (m *canaryService) addr(fam corev1.IPFamily, n int) netip.AddrPort {
	b := m.env.PodCIDRs[fam].Addr().AsSlice()
	b[len(b)-1] = byte(100 + n)
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, 7)
}

func (m *canaryService) slice(fam corev1.IPFamily) *discoveryv1.EndpointSlice {
	name, proto, port := "canary", corev1.ProtocolUDP, int32(7)
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   canaryName + "-" + strings.ToLower(string(fam)),
			Labels: map[string]string{discoveryv1.LabelServiceName: canaryName, discoveryv1.LabelManagedBy: randomcluster.ManagedBy},
		},
		AddressType: discoveryv1.AddressType(fam),
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{m.addr(fam, m.endpoint[fam]).Addr().String()}}},
	}
}

// phaseFamily is the family whose canary endpoint phase i changes last.
func (m *canaryService) phaseFamily(i int) corev1.IPFamily { return canaryFamily(i) }

// canaryFamily is the family of phase i's canary: IPv4 and IPv6 in turn.
func canaryFamily(i int) corev1.IPFamily {
	return []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}[i%2]
}

// flows are the canary flows of phase i: the first (at the start, both)
// are answered by an address the proxy's reconciliation deletes them
// for, the other by the current endpoint.
func (m *canaryService) flows(i int) []conntrack.Flow {
	port := uint16(60000 + 10*i)
	var stale, live []conntrack.Flow
	for _, fam := range m.env.Families() {
		src := m.addr(fam, m.endpoint[fam])
		if i == 0 {
			src = m.addr(fam, 99)
		}
		f := injectedFlow(m.env, fam, corev1.ProtocolUDP, netip.AddrPortFrom(m.clusterIPs[fam], 7), src, &port)
		if i == 0 || fam == m.phaseFamily(i) {
			stale = append(stale, f)
		} else {
			live = append(live, f)
		}
	}
	return append(stale, live...)
}

// stale is how many of flows(i) the phase makes stale.
func (m *canaryService) stale(i int) int {
	if i == 0 {
		return len(m.env.Families())
	}
	return 1
}

// step moves phase i's family's canary endpoint on: its flows are stale.
func (m *canaryService) step(ctx context.Context, t *testing.T, e *kubeProxyEnv, i int) {
	t.Helper()
	fam := m.phaseFamily(i)
	m.endpoint[fam]++
	m.update(ctx, t, e, fam)
}

// update writes a family's canary slice.
func (m *canaryService) update(ctx context.Context, t *testing.T, e *kubeProxyEnv, fam corev1.IPFamily) {
	t.Helper()
	api := e.client.DiscoveryV1().EndpointSlices(e.namespace)
	want := m.slice(fam)
	sl, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints = want.Endpoints
	if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reset gives the canary its first endpoints back, for the next proxy.
func (m *canaryService) reset(ctx context.Context, t *testing.T, e *kubeProxyEnv) {
	t.Helper()
	for _, fam := range m.env.Families() {
		m.endpoint[fam] = 0
		m.update(ctx, t, e, fam)
	}
}

// compareFlows compares the flows each proxy left after phase i.
func compareFlows(t *testing.T, i int, ph conntrackPhase, created *createdCluster, kp, ip map[string]bool, total *conntrackTally) {
	t.Helper()
	for _, f := range ph.flows {
		k := flowKey(f)
		total.cases++
		if !kp[k] {
			total.deleted++
		}
		if kp[k] == ip[k] {
			continue
		}
		total.differ++
		fam := familyOf(f.Orig.Dst)
		d := flowDifference{phase: i, flow: f, kubeProxyKept: kp[k], servedChange: i == 0 || fam == canaryFamily(i) || len(servedChanges(ph, created, fam)) > 0,
			copiesByChance: copiesByChance(ph, netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort))}
		ex := explainFlow(d)
		if ex == nil {
			total.groups["unexplained"]++
			names := created.servicesIn(" " + netip.AddrPortFrom(f.Orig.Dst, f.Orig.DstPort).String() + " ")
			t.Errorf("phase %d: %s (services %s; the phase changed the served slices %v of the family); their slices before and after:\n%s",
				i, d, strings.Join(names, ","), servedChanges(ph, created, fam), describeSlices(ph, names))
			continue
		}
		total.groups[ex.name]++
		t.Logf("%s: phase %d: %s", ex.name, i, d)
	}
}

// describeSlices prints the endpoints of the named Services' slices
// before and after a phase.
func describeSlices(ph conntrackPhase, names []string) string {
	var b strings.Builder
	for _, when := range []struct {
		name  string
		state slicesState
	}{{"before", ph.before}, {"after", ph.after}} {
		for _, name := range slices.Sorted(maps.Keys(when.state)) {
			sl := when.state[name]
			if slices.Contains(names, sl.Labels[discoveryv1.LabelServiceName]) {
				fmt.Fprintf(&b, "  %s %s: %s\n", when.name, name, strings.Join(endpointsRead(sl), "; "))
			}
		}
	}
	return b.String()
}

// flowDifference is a flow one proxy left and the other deleted.
type flowDifference struct {
	phase         int
	flow          conntrack.Flow
	kubeProxyKept bool
	// servedChange says the phase changed endpoints that ipvsplane's
	// model holds in the flow's family, of a Service with a UDP port.
	servedChange bool
	// copiesByChance says the flow's endpoint is listed in two slices
	// with different conditions, before or after the phase.
	copiesByChance bool
}

// endpointsRead is what a slice says of its endpoints, as ipvsplane
// reads it: each endpoint with each port, conditions unset read as their
// defaults, of an address listed twice the copy kept (a later one unless
// it is terminating); none for no slice.
func endpointsRead(sl *discoveryv1.EndpointSlice) []string {
	if sl == nil {
		return nil
	}
	kept := map[string]string{}
	for _, p := range sl.Ports {
		for _, e := range sl.Endpoints {
			c := e.Conditions
			terminating := c.Terminating != nil && *c.Terminating
			k := fmt.Sprintf("%s %s/%d %s", *p.Name, *p.Protocol, *p.Port, e.Addresses[0])
			if _, seen := kept[k]; !seen || !terminating {
				kept[k] = fmt.Sprintf("%s ready=%v serving=%v terminating=%v node=%s zone=%s hints=%v", k,
					c.Ready == nil || *c.Ready, c.Serving == nil || *c.Serving, terminating, deref(e.NodeName), deref(e.Zone), e.Hints)
			}
		}
	}
	return slices.Sorted(maps.Values(kept))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// copiesByChance reports whether ep (address and port) is listed in two
// slices, before or after a phase, whose copies differ in being serving:
// which copy kube-proxy keeps is chance.
func copiesByChance(ph conntrackPhase, ep netip.AddrPort) bool {
	for _, state := range []slicesState{ph.before, ph.after} {
		serving := map[bool][]string{}
		for name, sl := range state {
			for _, p := range sl.Ports {
				for _, e := range sl.Endpoints {
					if p.Port != nil && e.Addresses[0] == ep.Addr().String() && uint16(*p.Port) == ep.Port() {
						s := e.Conditions.Serving == nil || *e.Conditions.Serving
						serving[s] = append(serving[s], name)
					}
				}
			}
		}
		if len(serving[true]) > 0 && len(serving[false]) > 0 {
			return true
		}
	}
	return false
}

// servedChanges returns the slices of family fam whose endpoints, as
// ipvsplane reads them (conditions unset read as their defaults), a round
// changed, of Services with a cluster IP of that family and a UDP port
// with endpoints of that family before or after the round.
func servedChanges(ph conntrackPhase, created *createdCluster, fam corev1.IPFamily) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(ph.before)) {
		sl := ph.before[name]
		svc := created.services[sl.Labels[discoveryv1.LabelServiceName]]
		if _, headless := sl.Labels[randomcluster.LabelHeadless]; headless {
			continue
		}
		if corev1.IPFamily(sl.AddressType) != fam || slices.Equal(endpointsRead(sl), endpointsRead(ph.after[name])) || svc == nil ||
			!slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Protocol == corev1.ProtocolUDP && (len(endpointsServing(ph.before, svc.Name, p, fam)) > 0 || len(endpointsServing(ph.after, svc.Name, p, fam)) > 0)
			}) {
			continue
		}
		if slices.ContainsFunc(svc.Spec.ClusterIPs, func(ip string) bool {
			a, err := netip.ParseAddr(ip)
			return err == nil && familyOf(a) == fam
		}) {
			out = append(out, name)
		}
	}
	return out
}

func (d flowDifference) String() string {
	kept := "ipvsplane kept, kube-proxy deleted"
	if d.kubeProxyKept {
		kept = "kube-proxy kept, ipvsplane deleted"
	}
	return flowKey(d.flow) + ": " + kept
}

// conntrackExclusion is a difference in the flows left that a row of
// docs/differences-from-kube-proxy.md explains.
type conntrackExclusion struct {
	name string
	// doc quotes the row of docs/differences-from-kube-proxy.md.
	doc   string
	match func(d flowDifference) bool
}

var conntrackExclusions = []conntrackExclusion{
	{
		name: "SCTP flows reconciled",
		doc:  "SCTP entries are reconciled the same way",
		match: func(d flowDifference) bool {
			return d.flow.Orig.Protocol == inet.SCTP && d.kubeProxyKept
		},
	},
	{
		// kube-proxy reconciled a family after a change ipvsplane's
		// model does not hold; the flow is stale all the same, and goes
		// at ipvsplane's next reconciliation of the family.
		name: "a change to slices that changes no endpoint served calls for no reconciliation",
		doc:  "A change to slices that changes no endpoint as ipvsplane reads them (of a family the Service has no cluster IP of, a condition set to what unset means, a label) calls for none",
		match: func(d flowDifference) bool {
			return !d.kubeProxyKept && !d.servedChange
		},
	},
	{
		name: "an endpoint in two slices, the copy kube-proxy keeps is chance",
		doc:  "an endpoint (address and port) listed in two slices, neither copy terminating (or every copy terminating): the copy kept, and with it the endpoint's node (KUBE-LOOP-BACK, Local real servers) and conditions, follows Go map order, so it is chance",
		match: func(d flowDifference) bool {
			return d.copiesByChance
		},
	},
}

func explainFlow(d flowDifference) *conntrackExclusion {
	for i := range conntrackExclusions {
		if conntrackExclusions[i].match(d) {
			return &conntrackExclusions[i]
		}
	}
	return nil
}

// raiseConntrackMax makes room for at least n entries in the table, until
// the test ends.
func raiseConntrackMax(t *testing.T, n int) {
	t.Helper()
	const name = "/proc/sys/net/netfilter/nf_conntrack_max"
	old, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var have int
	if _, err := fmt.Sscan(string(old), &have); err != nil || have >= n {
		return
	}
	if err := os.WriteFile(name, []byte(fmt.Sprint(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(name, old, 0o644) })
}

// difftestSeedList returns the seeds to run: defaults, or those
// IPVSPLANE_DIFFTEST_SEEDS lists ("1,2,3").
func difftestSeedList(t *testing.T, defaults []uint64) []uint64 {
	t.Helper()
	s := os.Getenv("IPVSPLANE_DIFFTEST_SEEDS")
	if s == "" {
		return defaults
	}
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		var n uint64
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil {
			t.Fatalf("IPVSPLANE_DIFFTEST_SEEDS=%q: %v", s, err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}
