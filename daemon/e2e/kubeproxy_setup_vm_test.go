//go:build vmtest

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// kubeProxyNodeName is the Node both proxies serve, and kubeProxyOtherNode
// the node the remote endpoints sit on.
const (
	kubeProxyNodeName  = "kp-node"
	kubeProxyOtherNode = "kp-other"
	// kubeProxyNodeIP is the guest's eth0, the node's InternalIP.
	kubeProxyNodeIP = "10.0.2.15"
)

// kubeProxyEnv is a node for kube-proxy and ipvsplane in turn: the guest's
// root network namespace (where the API server is reachable), three
// backends behind veth pairs (10.244.N.2, gateway 10.244.N.1 on the node)
// and a client (192.168.50.2, gateway 192.168.50.1), the Node object, a
// namespace of Services with their EndpointSlices, and one configuration
// file both proxies read.
type kubeProxyEnv struct {
	client     kubernetes.Interface
	namespace  string
	dir        string
	kubeconfig string
	configFile string
	backends   []*testutil.NetNS
	clientNS   *testutil.NetNS
}

// newKubeProxyEnv builds the node's network, writes the kubeconfig and the
// KubeProxyConfiguration and creates the Node and the namespace; the test's
// end removes them.
func newKubeProxyEnv(t *testing.T, namespace string) *kubeProxyEnv {
	t.Helper()
	e := newKubeProxyNode(t)
	e.writeConfig(t, fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: %s
clientConnection:
  kubeconfig: %s
clusterCIDR: 10.244.0.0/16
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
ipvs:
  syncPeriod: 30s
  minSyncPeriod: 0s
`, kubeProxyNodeName, e.kubeconfig))

	e.clientNS = testutil.NewNetNS(t)
	attachToRoot(t, "kp-c", e.clientNS, "c0", "192.168.50.1/24", "192.168.50.2/24")
	for i := 1; i <= 3; i++ {
		b := testutil.NewNetNS(t)
		attachToRoot(t, fmt.Sprintf("kp-b%d", i), b, "b0", fmt.Sprintf("10.244.%d.1/24", i), fmt.Sprintf("10.244.%d.2/24", i))
		serveEcho(t, b, fmt.Sprintf("10.244.%d.2", i))
		e.backends = append(e.backends, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.createNode(ctx, t, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: kubeProxyNodeName, Labels: map[string]string{"kubernetes.io/hostname": kubeProxyNodeName}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: kubeProxyNodeIP},
			{Type: corev1.NodeHostName, Address: kubeProxyNodeName},
		}},
	})
	e.createNamespace(t, namespace)
	return e
}

// newKubeProxyNode is the part of a kube-proxy test's node every such test
// shares: the programs it needs, the API server's client and kubeconfig,
// a directory, and the node left clean at the test's end. The test then
// writes the configuration and creates the Node and a namespace.
func newKubeProxyNode(t *testing.T) *kubeProxyEnv {
	t.Helper()
	testutil.RequireVM(t)
	for _, p := range []string{"kube-proxy", "ipvsplane", "ipvsadm", "ipset", "iptables-save", "ip6tables-save", "nft", "ip"} {
		testutil.RequireProgram(t, p)
	}
	cp := controlplane.FromVM(t)
	// Registered first, so it runs last, after the programs stopped: the
	// node is left clean for the next test even when this one failed
	// half-way.
	t.Cleanup(func() {
		if out, err := exec.Command("ipvsplane", "cleanup", "--state-file=").CombinedOutput(); err != nil {
			t.Logf("ipvsplane cleanup: %v\n%s", err, out)
		}
		removeKubeProxyLeftovers(t, takeSnapshot(t))
	})
	e := &kubeProxyEnv{client: kubernetes.NewForConfigOrDie(cp.RESTConfig()), dir: t.TempDir()}
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.kubeconfig, cp.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.configFile = filepath.Join(e.dir, "kube-proxy.yaml")
	return e
}

// writeConfig writes the KubeProxyConfiguration both proxies read.
func (e *kubeProxyEnv) writeConfig(t *testing.T, config string) {
	t.Helper()
	if err := os.WriteFile(e.configFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// createNode creates the Node the proxies serve (replacing one a failed
// test left) and deletes it at the test's end.
func (e *kubeProxyEnv) createNode(ctx context.Context, t *testing.T, node *corev1.Node) {
	t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating Node %s: %v", node.Name, err)
	}
	t.Cleanup(func() {
		e.client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
}

// createNamespace creates the namespace of the test's Services and
// EndpointSlices (kubeNamespace: they go at the test's end, the namespace
// stays, as the control plane has no namespace controller to finish its
// deletion and a repeated run would find it Terminating).
func (e *kubeProxyEnv) createNamespace(t *testing.T, namespace string) {
	t.Helper()
	e.namespace = namespace
	kubeNamespace(t, e.client, namespace)
}

// rootVeth connects the guest's root namespace (name) to peer (peerName).
func rootVeth(t testing.TB, name string, peer *testutil.NetNS, peerName string) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peerName, PeerNamespace: netlink.NsFd(peer.FD())}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s-%s: %v", name, peerName, err)
	}
	// The pair goes with the peer's namespace; the root end is deleted
	// too, in case the namespace outlives the test.
	t.Cleanup(func() { netlink.LinkDel(veth) })
	rootIP(t, "link", "set", name, "up")
	peer.IP(t, "link", "set", peerName, "up")
}

// rootIP runs ip in the guest's root namespace.
func rootIP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// serveEcho answers, on addr's TCP ports 8080 and 9000 and UDP port 5353,
// every line (TCP) or datagram (UDP) with itself.
func serveEcho(t *testing.T, ns *testutil.NetNS, addr string) {
	t.Helper()
	for _, port := range []string{"8080", "9000"} {
		ns.ServeEcho(t, net.JoinHostPort(addr, port))
	}
	ns.ServeEchoUDP(t, net.JoinHostPort(addr, "5353"))
}

// kubeProxyEndpoint is an endpoint of a test service: backend i (1-3) and
// whether it is on this node.
type kubeProxyEndpoint struct {
	backend int
	local   bool
}

// kubeProxyService is a Service of the test, with its endpoints and, for
// a load balancer, the ingress IP its status gets.
type kubeProxyService struct {
	svc       *corev1.Service
	endpoints []kubeProxyEndpoint
	ingress   string
}

// create makes the Service, its load balancer status and its
// EndpointSlice, and returns the Service as the API server stored it.
func (e *kubeProxyEnv) create(ctx context.Context, t *testing.T, s kubeProxyService) *corev1.Service {
	t.Helper()
	svcs := e.client.CoreV1().Services(e.namespace)
	svc, err := svcs.Create(ctx, s.svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s: %v", s.svc.Name, err)
	}
	if s.ingress != "" {
		vip := corev1.LoadBalancerIPModeVIP
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.ingress, IPMode: &vip}}
		if svc, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("load balancer status of %s: %v", s.svc.Name, err)
		}
	}
	if len(s.endpoints) == 0 {
		return svc
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   svc.Name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "ipvsplane-e2e"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range svc.Spec.Ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
			Name: ptr(p.Name), Protocol: ptr(p.Protocol), Port: ptr(int32(p.TargetPort.IntValue())),
		})
	}
	for _, ep := range s.endpoints {
		node := kubeProxyOtherNode
		if ep.local {
			node = kubeProxyNodeName
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.2", ep.backend)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			NodeName:   ptr(node),
		})
	}
	if _, err := e.client.DiscoveryV1().EndpointSlices(e.namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating EndpointSlice of %s: %v", svc.Name, err)
	}
	return svc
}

func ptr[T any](v T) *T { return &v }

// kubeProxyShapes are the Services of the comparison: one of each shape
// kube-proxy's IPVS mode programs differently. Backend 1 is on this node,
// backends 2 and 3 on another.
func kubeProxyShapes() []kubeProxyService {
	port := func(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
	}
	svc := func(name string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
	}
	both := []kubeProxyEndpoint{{1, true}, {2, false}}
	local := corev1.ServiceExternalTrafficPolicyLocal

	web := svc("web", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080), port("dns", corev1.ProtocolUDP, 53, 5353))
	np := svc("nodeport", corev1.ServiceTypeNodePort, port("http", corev1.ProtocolTCP, 80, 8080), port("dns", corev1.ProtocolUDP, 53, 5353))
	sctp := svc("sctp", corev1.ServiceTypeNodePort, port("sctp", corev1.ProtocolSCTP, 9000, 9000))
	lb := svc("lb-local", corev1.ServiceTypeLoadBalancer, port("http", corev1.ProtocolTCP, 80, 8080))
	lb.Spec.ExternalTrafficPolicy = local
	lb.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "10.0.2.0/24"}
	lbFW := svc("lb-fw", corev1.ServiceTypeLoadBalancer, port("https", corev1.ProtocolTCP, 8443, 8080))
	lbFW.Spec.AllocateLoadBalancerNodePorts = ptr(false)
	lbFW.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	ext := svc("external", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080))
	ext.Spec.ExternalIPs = []string{"192.0.2.20"}
	extLocal := svc("external-local", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080))
	extLocal.Spec.ExternalIPs = []string{"192.0.2.21"}
	extLocal.Spec.ExternalTrafficPolicy = local
	sticky := svc("sticky", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080))
	sticky.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	sticky.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}
	itp := svc("internal-local", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080))
	itp.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	empty := svc("no-endpoints", corev1.ServiceTypeClusterIP, port("http", corev1.ProtocolTCP, 80, 8080))

	return []kubeProxyService{
		{svc: web, endpoints: both},
		{svc: np, endpoints: both},
		{svc: sctp, endpoints: []kubeProxyEndpoint{{3, false}}},
		{svc: lb, endpoints: both, ingress: "192.0.2.10"},
		{svc: lbFW, endpoints: both, ingress: "192.0.2.11"},
		{svc: ext, endpoints: both},
		{svc: extLocal, endpoints: []kubeProxyEndpoint{{2, false}}},
		{svc: sticky, endpoints: both},
		{svc: itp, endpoints: both},
		{svc: empty},
	}
}

// kubeProxyProc is a proxy program the test started: kube-proxy or
// ipvsplane, its output going to a file.
type kubeProxyProc struct {
	name string
	proc *testutil.Proc
	log  string
}

// startKubeProxyProc starts a program and stops it at the test's end if
// the test did not.
func startKubeProxyProc(t *testing.T, dir, name string, args ...string) *kubeProxyProc {
	t.Helper()
	p := &kubeProxyProc{name: name, log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(name), time.Now().UnixNano()))}
	var err error
	if p.proc, err = startLogged(nil, p.log, name, args...); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// startLogged starts name with args in ns (nil: the guest's root
// namespace), its output appended to the file log.
func startLogged(ns *testutil.NetNS, log, name string, args ...string) (*testutil.Proc, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	return testutil.StartProc(cmd, ns)
}

// stop ends the program with SIGTERM, as a DaemonSet's pod is ended, and
// kills it if it lingers; how it exited is not the test's concern.
func (p *kubeProxyProc) stop(t *testing.T) {
	if err := p.proc.Stop(30 * time.Second); errors.Is(err, testutil.ErrNotStopped) {
		t.Log(err)
	}
}

// exited reports whether the program ended by itself.
func (p *kubeProxyProc) exited() bool { return p.proc.Exited() }

// grep returns the lines of the program's output that match pattern.
func (p *kubeProxyProc) grep(pattern string) string {
	re := regexp.MustCompile(pattern)
	b, _ := os.ReadFile(p.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// tail returns the last lines of the program's output.
func (p *kubeProxyProc) tail(n int) string { return tail(p.log, n) }

// startKubeProxy runs kube-proxy with the environment's configuration.
func (e *kubeProxyEnv) startKubeProxy(t *testing.T) *kubeProxyProc {
	return startKubeProxyProc(t, e.dir, "kube-proxy", "--config="+e.configFile, "--v=2")
}

// startIPVSPlane runs the ipvsplane daemon with the same configuration
// and kube-proxy's --v (which /configz shows); its log at debug level.
func (e *kubeProxyEnv) startIPVSPlane(t *testing.T) *kubeProxyProc {
	return startKubeProxyProc(t, e.dir, "ipvsplane", "run", "--config="+e.configFile, "--v=2", "--state-file=", "--log-level=debug")
}

// runTool runs a program in the guest's root namespace and returns its
// output, failing the test if it fails.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
