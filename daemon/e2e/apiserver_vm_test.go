//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kubeNet is the traffic network of the API server tests. The node is the
// guest's root namespace, where the daemon runs; the client and two
// backends are namespaces behind veth pairs:
//
//	client 192.168.50.2 --- e2e-c 192.168.50.1 [root] e2e-b1 10.244.50.1 --- backend-1 10.244.50.2
//	                                                   e2e-b2 10.244.51.1 --- backend-2 10.244.51.2
type kubeNet struct {
	client   *testutil.NetNS
	backends []string // "10.244.50.2", "10.244.51.2"
}

const kubeNetNodeAddr = "192.168.50.1"

func setupKubeNet(t *testing.T) *kubeNet {
	t.Helper()
	n := &kubeNet{client: testutil.NewNetNS(t)}
	attachToRoot(t, "e2e-c", n.client, "eth0", "192.168.50.1/24", "192.168.50.2/24")
	for i := 1; i <= 2; i++ {
		b := testutil.NewNetNS(t)
		attachToRoot(t, fmt.Sprintf("e2e-b%d", i), b, "eth0", fmt.Sprintf("10.244.%d.1/24", 49+i), fmt.Sprintf("10.244.%d.2/24", 49+i))
		addr := fmt.Sprintf("10.244.%d.2", 49+i)
		b.ServeTCP(t, addr+":8080", fmt.Sprintf("backend-%d", i))
		n.backends = append(n.backends, addr)
	}
	return n
}

// attachToRoot connects ns to the guest's root namespace with a veth pair
// (see rootVeth): rootName holds rootAddr in the root namespace, nsName
// holds nsAddr in ns, whose default route goes through the root
// namespace. It is NetNS.Link with the root namespace, which is no NetNS,
// as the router.
func attachToRoot(t testing.TB, rootName string, ns *testutil.NetNS, nsName, rootAddr, nsAddr string) {
	t.Helper()
	rootVeth(t, rootName, ns, nsName)
	rootIP(t, "addr", "add", rootAddr, "dev", rootName)
	ns.IP(t, "addr", "add", nsAddr, "dev", nsName)
	gw, _, _ := strings.Cut(rootAddr, "/")
	ns.IP(t, "route", "add", "default", "via", gw)
}

// backendsReached sends n connections to addr from the client and counts
// the answers by backend name; a failed connection counts under "error".
func (n *kubeNet) backendsReached(addr string, count int) map[string]int {
	got := map[string]int{}
	for range count {
		reply, err := n.client.DialTCP("", addr, 3*time.Second)
		if err != nil {
			got["error"]++
			continue
		}
		name, _, _ := strings.Cut(reply, " ")
		got[name]++
	}
	return got
}

// kubeFixture is one API server test: the control plane, a client and
// the test's namespace.
type kubeFixture struct {
	t      *testing.T
	cp     *controlplane.Remote
	client kubernetes.Interface
	ns     string
	ctx    context.Context
}

func newKubeFixture(t *testing.T, ns string) *kubeFixture {
	t.Helper()
	testutil.RequireVM(t)
	cp := controlplane.FromVM(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	kubeNamespace(t, client, ns)
	return &kubeFixture{t: t, cp: cp, client: client, ns: ns, ctx: t.Context()}
}

func (f *kubeFixture) createService(name string, typ corev1.ServiceType, port int32) *corev1.Service {
	f.t.Helper()
	svc, err := f.client.CoreV1().Services(f.ns).Create(f.ctx, kubetest.Service(f.ns, name, typ, port), metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return svc
}

// putSlice creates or replaces EndpointSlice name of service svc.
func (f *kubeFixture) putSlice(svc, name string, port int32, addrs ...string) {
	f.t.Helper()
	if err := kubetest.PutSlice(f.ctx, f.client, kubetest.Triggered(kubetest.Slice(f.ns, svc, name, port, addrs...))); err != nil {
		f.t.Fatal(err)
	}
}

// setNodeAddresses creates the Node object or replaces its InternalIP
// addresses (a status update, as the kubelet makes it).
func (f *kubeFixture) setNodeAddresses(name string, addrs ...string) {
	f.t.Helper()
	nodes := f.client.CoreV1().Nodes()
	node, err := nodes.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		node, err = nodes.Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	node.Status.Addresses = nil
	for _, a := range addrs {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	if _, err := nodes.UpdateStatus(f.ctx, node, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// servingReals describes a virtual server's serving real servers in the table
// ("none" if it is missing), for comparison with want. Real servers at
// weight 0 are left out: a removed endpoint is drained at weight 0 until
// its connections end, as in kube-proxy, and the tests' own connections
// linger in TIME_WAIT.
func servingReals(table map[string]*virtualServer, key string) string {
	vs := table[key]
	if vs == nil {
		return "none"
	}
	return strings.Join(slices.DeleteFunc(slices.Clone(vs.reals), drainingReal), ",")
}

// drainingReal reports whether a real server, as reals writes it, is at
// weight 0.
func drainingReal(real string) bool { return strings.HasSuffix(real, " 0") }

// realsOf is the weight-1 real servers of addrs on port, as reals writes
// them.
func realsOf(port int, addrs ...string) string {
	var out []string
	for _, a := range addrs {
		out = append(out, fmt.Sprintf("%s:%d 1", a, port))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// The daemon follows Services, EndpointSlices and its Node through the
// real API server and programs the kernel that ipvsadm, ipset, ip and nft
// read; traffic flows through a cluster IP and a node port; an API server
// crash deletes nothing, and after the restart the daemon programs new
// changes without reprogramming what it already had.
func TestDaemonFollowsAPIServer(t *testing.T) {
	f := newKubeFixture(t, "e2e-follow")
	n := setupKubeNet(t)
	const node = "e2e-follow-node"
	f.setNodeAddresses(node, kubeNetNodeAddr)

	web := f.createService("web", corev1.ServiceTypeClusterIP, 80)
	np := f.createService("np", corev1.ServiceTypeNodePort, 81)
	f.putSlice("np", "np-1", 8080, n.backends...)
	// Services the daemon must leave alone when the API server comes back.
	const fillers = 20
	for i := range fillers {
		name := fmt.Sprintf("filler-%d", i)
		f.createService(name, corev1.ServiceTypeClusterIP, 80)
		f.putSlice(name, name+"-1", 8080, fmt.Sprintf("10.244.200.%d", 2*i+1), fmt.Sprintf("10.244.200.%d", 2*i+2))
	}

	d := startKubeDaemon(t, f.cp, node, "--ipvs-sync-period=10s")
	t.Logf("first sync %v after the start", d.WaitSynced(t, 2*time.Minute).Round(time.Millisecond))
	webIP := web.Spec.ClusterIP
	webKey := func(port int) string { return fmt.Sprintf("TCP %s:%d", webIP, port) }
	nodePort := int(np.Spec.Ports[0].NodePort)
	wait := func(what string, cond func() string) {
		t.Helper()
		eventuallyKernel(t, d, time.Minute, what, cond)
	}
	wantReals := func(key, want string) func() string {
		return func() string {
			if got := servingReals(ipvsadmTable(t), key); got != want {
				return fmt.Sprintf("%s has real servers %q, want %q", key, got, want)
			}
			return ""
		}
	}

	// A service without endpoints: a virtual server without real servers,
	// its address bound, its entry in KUBE-CLUSTER-IP, the table there.
	wait("web without endpoints", wantReals(webKey(80), ""))
	if addrs := boundAddrs(t); !slices.Contains(addrs, webIP+"/32") {
		t.Errorf("kube-ipvs0 lacks %s/32: %v", webIP, addrs)
	}
	if m := ipsetMembers(t, "KUBE-CLUSTER-IP"); !slices.Contains(m, webIP+",tcp:80") {
		t.Errorf("KUBE-CLUSTER-IP lacks %s,tcp:80: %v", webIP, m)
	}
	testutil.RequireProgram(t, "nft")
	if out, err := exec.Command("nft", "list", "tables").Output(); err != nil || !strings.Contains(string(out), "ipvsplane") {
		t.Errorf("nft list tables: %v\n%s", err, out)
	}

	f.putSlice("web", "web-1", 8080, n.backends[0])
	wait("web's first endpoint", wantReals(webKey(80), realsOf(8080, n.backends[0])))
	if got := n.backendsReached(webIP+":80", 4); got["backend-1"] != 4 {
		t.Errorf("through the cluster IP with one endpoint: %v", got)
	}
	f.putSlice("web", "web-1", 8080, n.backends...)
	wait("web's second endpoint", wantReals(webKey(80), realsOf(8080, n.backends...)))
	if got := n.backendsReached(webIP+":80", 6); got["backend-1"] == 0 || got["backend-2"] == 0 {
		t.Errorf("through the cluster IP with two endpoints: %v", got)
	}

	if err := kubetest.UpdateService(f.ctx, f.client, f.ns, "web", func(svc *corev1.Service) { svc.Spec.Ports[0].Port = 8000 }); err != nil {
		t.Fatal(err)
	}
	wait("web's port changed", func() string {
		table := ipvsadmTable(t)
		if table[webKey(80)] != nil {
			return webKey(80) + " is still there"
		}
		return wantReals(webKey(8000), realsOf(8080, n.backends...))()
	})
	if m := ipsetMembers(t, "KUBE-CLUSTER-IP"); !slices.Contains(m, webIP+",tcp:8000") || slices.Contains(m, webIP+",tcp:80") {
		t.Errorf("KUBE-CLUSTER-IP after the port change: %v", m)
	}
	if got := n.backendsReached(webIP+":8000", 4); got["error"] != 0 {
		t.Errorf("through the new port: %v", got)
	}

	f.putSlice("web", "web-1", 8080, n.backends[1])
	wait("web's endpoint removed", wantReals(webKey(8000), realsOf(8080, n.backends[1])))
	if got := n.backendsReached(webIP+":8000", 4); got["backend-2"] != 4 {
		t.Errorf("after backend-1 left: %v", got)
	}

	// Node ports are served on every address of the node's interfaces,
	// as kube-proxy's IPVS mode serves them, whatever the Node lists.
	for _, addr := range []string{kubeNetNodeAddr, "10.0.2.15"} {
		wait("node port on "+addr, wantReals(fmt.Sprintf("TCP %s:%d", addr, nodePort), realsOf(8080, n.backends...)))
	}
	if got := n.backendsReached(fmt.Sprintf("%s:%d", kubeNetNodeAddr, nodePort), 4); got["error"] != 0 {
		t.Errorf("through the node port: %v", got)
	}

	// The Node object gives the node's primary IP: a load balancer whose
	// source ranges hold it lets the node's own traffic to it through
	// (KUBE-LOAD-BALANCER-SOURCE-IP), and that follows the Node.
	lb := kubetest.Service(f.ns, "lb", corev1.ServiceTypeLoadBalancer, 82)
	lb.Spec.LoadBalancerSourceRanges = []string{"192.168.50.0/24"}
	lb, err := f.client.CoreV1().Services(f.ns).Create(f.ctx, lb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.30"}}
	if _, err := f.client.CoreV1().Services(f.ns).UpdateStatus(f.ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.putSlice("lb", "lb-1", 8080, n.backends...)
	const fromNode = "192.0.2.30,tcp:82,192.0.2.30"
	nodeAllowed := func(want bool) func() string {
		return func() string {
			if got := slices.Contains(ipsetMembers(t, "KUBE-LOAD-BALANCER-SOURCE-IP"), fromNode); got != want {
				return fmt.Sprintf("KUBE-LOAD-BALANCER-SOURCE-IP holds %s: %v, want %v", fromNode, got, want)
			}
			return ""
		}
	}
	wait("the node, inside the source ranges, allowed", nodeAllowed(true))
	f.setNodeAddresses(node, "10.0.2.15")
	wait("the node's new primary IP, outside them, not allowed", nodeAllowed(false))
	f.setNodeAddresses(node, kubeNetNodeAddr)
	wait("the node allowed again", nodeAllowed(true))

	f.apiServerRestart(d, n, webIP)

	if err := f.client.DiscoveryV1().EndpointSlices(f.ns).Delete(f.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("web's slice deleted", wantReals(webKey(8000), ""))
	if err := f.client.CoreV1().Services(f.ns).Delete(f.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("web deleted", func() string {
		if table := ipvsadmTable(t); table[webKey(8000)] != nil {
			return webKey(8000) + " is still there"
		}
		if slices.Contains(boundAddrs(t), webIP+"/32") {
			return webIP + " is still bound"
		}
		if m := ipsetMembers(t, "KUBE-CLUSTER-IP"); slices.Contains(m, webIP+",tcp:8000") {
			return "KUBE-CLUSTER-IP still holds web"
		}
		return ""
	})
}

// kernelView is what the independent readers see, for comparing before
// and after.
type kernelView struct {
	table map[string]string // virtual server -> real servers
	bound []string
	set   []string
}

func readKernelView(t testing.TB) kernelView {
	t.Helper()
	v := kernelView{table: map[string]string{}, bound: boundAddrs(t), set: ipsetMembers(t, "KUBE-CLUSTER-IP")}
	for k, vs := range ipvsadmTable(t) {
		v.table[k] = vs.sched + " " + servingReals(map[string]*virtualServer{k: vs}, k)
	}
	slices.Sort(v.bound)
	slices.Sort(v.set)
	return v
}

func (v kernelView) diff(w kernelView) string {
	var out []string
	for k := range v.table {
		if w.table[k] != v.table[k] {
			out = append(out, fmt.Sprintf("%s: %q -> %q", k, v.table[k], w.table[k]))
		}
	}
	for k := range w.table {
		if _, ok := v.table[k]; !ok {
			out = append(out, fmt.Sprintf("%s: new %q", k, w.table[k]))
		}
	}
	if !slices.Equal(v.bound, w.bound) {
		out = append(out, fmt.Sprintf("kube-ipvs0: %v -> %v", v.bound, w.bound))
	}
	if !slices.Equal(v.set, w.set) {
		out = append(out, fmt.Sprintf("KUBE-CLUSTER-IP: %v -> %v", v.set, w.set))
	}
	return strings.Join(out, "; ")
}

// apiServerRestart kills the API server for longer than the daemon's
// sync period (10s): the kernel stays as it was, the daemon stays up;
// after the restart a new service is programmed, and the kernel
// operations between the crash and then are those of the new service
// alone, not a reprogramming of the 23 services already there.
func (f *kubeFixture) apiServerRestart(d *kubeDaemon, n *kubeNet, webIP string) {
	t := f.t
	t.Helper()
	ctx := f.ctx
	before := readKernelView(t)
	m0 := d.metrics(t)
	if err := f.cp.KillAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for time.Since(killed) < 15*time.Second {
		time.Sleep(5 * time.Second)
		if diff := before.diff(readKernelView(t)); diff != "" {
			t.Fatalf("%v after the API server was killed the kernel changed: %s", time.Since(killed).Round(time.Second), diff)
		}
		d.alive(t)
	}
	if got := n.backendsReached(webIP+":8000", 2); got["error"] != 0 {
		t.Errorf("through the cluster IP with the API server down: %v", got)
	}
	mDown := d.metrics(t)
	if err := f.cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("API server down for %v; %v syncs meanwhile (%v full), kernel unchanged",
		restarted.Sub(killed).Round(time.Second),
		mDown.sum("kubeproxy_sync_proxy_rules_duration_seconds_count")-m0.sum("kubeproxy_sync_proxy_rules_duration_seconds_count"),
		mDown.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_count")-m0.sum("kubeproxy_sync_full_proxy_rules_duration_seconds_count"))

	after := f.createService("after-restart", corev1.ServiceTypeClusterIP, 80)
	f.putSlice("after-restart", "after-restart-1", 8080, n.backends[0])
	key := fmt.Sprintf("TCP %s:80", after.Spec.ClusterIP)
	eventuallyKernel(t, d, 3*time.Minute, "a service created after the restart", func() string {
		if got := servingReals(ipvsadmTable(t), key); got != realsOf(8080, n.backends[0]) {
			return fmt.Sprintf("%s: %q", key, got)
		}
		return ""
	})
	resumed := time.Since(restarted)
	// Let anything the relist set off land before counting.
	time.Sleep(3 * time.Second)
	m1 := d.metrics(t)
	ops := m1.opsDelta(mDown)
	total := 0.0
	for _, v := range ops {
		total += v
	}
	syncs := m1.sum("kubeproxy_sync_proxy_rules_duration_seconds_count") - mDown.sum("kubeproxy_sync_proxy_rules_duration_seconds_count")
	t.Logf("after the restart: the new service programmed %v later; %v syncs, %v kernel operations %v",
		resumed.Round(time.Millisecond), syncs, total, ops)
	// The new service costs a handful (its set entry, virtual server, real
	// server, address); reprogramming the others would cost more than 60.
	if total > 10 {
		t.Errorf("%v kernel operations after the restart (%v): a reprogramming storm", total, ops)
	}
	if got := m1.sum("ipvsplane_sync_failures_total"); got != 0 {
		t.Errorf("%v failed syncs", got)
	}
	want := before
	want.table = maps.Clone(before.table)
	delete(want.table, key)
	got := readKernelView(t)
	delete(got.table, key)
	got.bound = slices.DeleteFunc(got.bound, func(s string) bool { return s == after.Spec.ClusterIP+"/32" })
	got.set = slices.DeleteFunc(got.set, func(s string) bool { return s == after.Spec.ClusterIP+",tcp:80" })
	if diff := want.diff(got); diff != "" {
		t.Errorf("the kernel after the restart, but for the new service: %s", diff)
	}
}
