//go:build clustertest

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The tests here cross from one node to the other, on both families;
// their names start with TestTwoNodes, so make test-cluster-nodes runs
// them and the one-node make test-cluster leaves them out.

// familyPairs pairs the two nodes' internal addresses by family, IPv4
// first: [near, far] for each.
func familyPairs(t *testing.T, near, far corev1.Node) [][2]string {
	t.Helper()
	nearIPs, farIPs := internalIPs(near), internalIPs(far)
	if len(nearIPs) != 2 || len(farIPs) != 2 {
		t.Fatalf("addresses %v and %v, want one of each family on each node", nearIPs, farIPs)
	}
	var pairs [][2]string
	for i := range nearIPs {
		if netip.MustParseAddr(nearIPs[i]).Is4() != netip.MustParseAddr(farIPs[i]).Is4() {
			t.Fatalf("addresses %v and %v are not in the same family order", nearIPs, farIPs)
		}
		pairs = append(pairs, [2]string{nearIPs[i], farIPs[i]})
	}
	return pairs
}

// pods are the pods of app (their label) not being deleted.
func (c *cluster) pods(t *testing.T, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			pods = append(pods, pod)
		}
	}
	return pods
}

// healthCheckAnswer is the part of kube-proxy's health-check node port
// answer the test reads.
type healthCheckAnswer struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints int `json:"localEndpoints"`
}

// expectHealthCheck waits until the health-check node port at addr
// answers code with count local endpoints of ns/name.
func expectHealthCheck(t *testing.T, addr, ns, name string, code, count int) {
	t.Helper()
	eventually(t, time.Minute, "health check http://"+addr, func() error {
		got, body, err := getStatus("http://" + addr + "/")
		if err != nil {
			return err
		}
		var a healthCheckAnswer
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			return fmt.Errorf("%d %q: %w", got, body, err)
		}
		if got != code || a.LocalEndpoints != count || a.Service.Namespace != ns || a.Service.Name != name {
			return fmt.Errorf("%d %q, want %d with %d local endpoints of %s/%s", got, body, code, count, ns, name)
		}
		return nil
	})
}

// expectNoAnswer checks that GET http://addr/hostname from this test, a
// client outside the nodes, gets no answer, and says how it failed.
func expectNoAnswer(t *testing.T, addr string) {
	t.Helper()
	start := time.Now()
	body, err := get("http://" + addr + "/hostname")
	if err == nil {
		t.Errorf("http://%s answered %q, want no answer", addr, body)
		return
	}
	t.Logf("http://%s: no answer after %v: %v", addr, time.Since(start).Round(time.Millisecond), err)
}

// expectOwnAddress checks that the client address a pod saw (netexec's
// /clientip, host:port) is one of this process's: not masqueraded.
func expectOwnAddress(t *testing.T, clientIP string) {
	t.Helper()
	host, _, err := net.SplitHostPort(strings.TrimSpace(clientIP))
	if err != nil {
		t.Fatalf("client address %q: %v", clientIP, err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.String() == host {
			return
		}
	}
	t.Errorf("the pod saw the client at %s, none of this process's addresses %v: masqueraded", host, addrs)
}

// routeVia routes addr (a host route) to the node at via in the
// namespace this test runs in, until the test ends.
func routeVia(t *testing.T, addr, via string) {
	t.Helper()
	prefix := addr + "/32"
	if netip.MustParseAddr(addr).Is6() {
		prefix = addr + "/128"
	}
	if out, err := exec.Command("ip", "route", "replace", prefix, "via", via).CombinedOutput(); err != nil {
		t.Fatalf("ip route replace %s via %s: %v: %s", prefix, via, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", prefix).Run() })
}

// A LoadBalancer Service with externalTrafficPolicy Local whose only
// endpoint is on the second node, on both families: the first node's
// health-check node port answers 503 with no local endpoint and the
// second's 200 with one (kube-proxy's JSON); the second node's node port
// answers with the client's own address (not masqueraded) while the
// first's gives no answer (it forwards to the remote pod without SNAT, as
// kube-proxy's IPVS mode does, and the reply does not come back through
// it), and so does the load balancer's address routed to the first node,
// until it is routed to the second. A pod on the first node reaches the
// load balancer's address all the same, and the endpoint sees the pod's
// own address: as upstream's "ExternalTrafficPolicy: Local should work
// from pods" wants.
func TestTwoNodesExternalTrafficPolicyLocal(t *testing.T) {
	c := newCluster(t)
	nodes := c.twoOrMoreNodes(t)
	near, far := nodes[0], nodes[1]
	ns := c.namespace(t, "etplocal")
	svc := c.serveHostnameOn(t, ns, "local", far.Name, 1, dualStack(corev1.ServiceSpec{
		Type:                  corev1.ServiceTypeLoadBalancer,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
	}))
	lbs := []string{addrAfter(c.lbPrefix.Addr(), 20), addrAfter(c.lbPrefix6.Addr(), 20)}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbs[0]}, {IP: lbs[1]}}
	if _, err := c.client.CoreV1().Services(ns).UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	healthPort := strconv.Itoa(int(svc.Spec.HealthCheckNodePort))
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	t.Logf("health-check node port %s, node port %s, load balancers %v", healthPort, nodePort, lbs)
	for i, pair := range familyPairs(t, near, far) {
		nearIP, farIP := pair[0], pair[1]
		expectHealthCheck(t, net.JoinHostPort(farIP, healthPort), ns, "local", 200, 1)
		expectHealthCheck(t, net.JoinHostPort(nearIP, healthPort), ns, "local", 503, 0)
		reachFromOutside(t, net.JoinHostPort(farIP, nodePort), "local-")
		clientIP, err := get("http://" + net.JoinHostPort(farIP, nodePort) + "/clientip")
		if err != nil {
			t.Fatal(err)
		}
		expectOwnAddress(t, clientIP)
		expectNoAnswer(t, net.JoinHostPort(nearIP, nodePort))
		lb := net.JoinHostPort(lbs[i], "80")
		expectNoAnswer(t, lb)
		routeVia(t, lbs[i], farIP)
		reachFromOutside(t, lb, "local-")
	}
	c.startPodOn(t, ns, "client", near.Name, false, corev1.Container{Name: "agnhost", Image: agnhost, Args: []string{"pause"}})
	pod, err := c.client.CoreV1().Pods(ns).Get(context.Background(), "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs {
		eventually(t, time.Minute, "a pod on "+near.Name+" to the load balancer "+lb, func() error {
			out, err := c.exec(context.Background(), ns, "client", "curl -s -g --connect-timeout 2 http://"+net.JoinHostPort(lb, "80")+"/clientip")
			if err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(strings.TrimSpace(out))
			if err != nil || !slices.ContainsFunc(pod.Status.PodIPs, func(ip corev1.PodIP) bool { return ip.IP == host }) {
				return fmt.Errorf("the endpoint saw %q, want one of the pod's addresses %v", out, pod.Status.PodIPs)
			}
			return nil
		})
	}
}

// A pod reaching its own Service's cluster IP, the Service's only
// endpoint, lands on itself (hairpin: the bridge sends the packet back
// out of the port it came in by, and the proxy masquerades it), on each
// family, on the second node.
func TestTwoNodesHairpin(t *testing.T) {
	c := newCluster(t)
	far := c.twoOrMoreNodes(t)[1]
	ns := c.namespace(t, "hairpin")
	svc := c.serveHostnameOn(t, ns, "hairpin", far.Name, 1, dualStack(corev1.ServiceSpec{}))
	pods := c.pods(t, ns, "hairpin")
	if len(pods) != 1 {
		t.Fatalf("%d pods, want one", len(pods))
	}
	pod := pods[0].Name
	ctx := context.Background()
	for _, ip := range svc.Spec.ClusterIPs {
		vip := net.JoinHostPort(ip, "80")
		eventually(t, time.Minute, "pod "+pod+" to "+vip, func() error {
			out, err := c.exec(ctx, ns, pod, "curl -s -g --connect-timeout 2 http://"+vip+"/hostname")
			if err == nil && out != pod {
				err = fmt.Errorf("answer %q, want %q", out, pod)
			}
			return err
		})
		out, err := c.exec(ctx, ns, pod, "curl -s -g --connect-timeout 2 http://"+vip+"/clientip")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod %s (%v) through %s saw itself as %s", pod, pods[0].Status.PodIPs, vip, out)
	}
}

// udpClientScript sends "hostname" once a second to the UDP service
// addresses $V4 and $V6 (port 81), each family from one socket bound to
// one source port, so that every datagram of a family is the same flow;
// netexec's answers (its pod's name, without a newline) are appended to
// /tmp/udp4 and /tmp/udp6. A socket that got an ICMP error (socat exits)
// is opened again on the same port.
const udpClientScript = `
send() {
  while true; do
    while true; do echo hostname; sleep 1; done | socat STDIO "UDP$1:$2,sourceport=$3,reuseaddr" >>/tmp/udp$1
    sleep 1
  done
}
send 4 "$V4" 40004 &
send 6 "$V6" 40006 &
wait
`

// A UDP flow from a pod on the first node to a cluster IP keeps one
// source port while the Service's only endpoint moves from the second
// node to the first (its Deployment's node selector changed): the flow
// reaches the new pod within seconds of the old one's deletion, on each
// family (the stale connection and conntrack entries are gone).
func TestTwoNodesUDPFollowsEndpoint(t *testing.T) {
	c := newCluster(t)
	nodes := c.twoOrMoreNodes(t)
	near, far := nodes[0], nodes[1]
	ns := c.namespace(t, "udpmove")
	svc := c.serveHostnameOn(t, ns, "udp", far.Name, 1, dualStack(corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "udp", Port: 81, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolUDP}},
	}))
	c.startPodOn(t, ns, "client", near.Name, false, corev1.Container{
		Name: "client", Image: agnhost, Command: []string{"bash", "-c", udpClientScript},
		Env: []corev1.EnvVar{
			{Name: "V4", Value: net.JoinHostPort(svc.Spec.ClusterIPs[0], "81")},
			{Name: "V6", Value: net.JoinHostPort(svc.Spec.ClusterIPs[1], "81")},
		},
	})
	ctx := context.Background()
	// lastAnswers is whether each family's last answer came from pod.
	lastAnswers := func(pod string) error {
		out, err := c.exec(ctx, ns, "client", "tail -c 100 /tmp/udp4; echo; tail -c 100 /tmp/udp6; echo")
		if err == nil && strings.Count(out, pod+"\n") != 2 {
			err = fmt.Errorf("last answers %q, want %s on both families", out, pod)
		}
		return err
	}
	old := c.pods(t, ns, "udp")[0].Name
	eventually(t, time.Minute, "the UDP flows to "+old, func() error { return lastAnswers(old) })

	dep, err := c.client.AppsV1().Deployments(ns).Get(ctx, "udp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: near.Name}
	if _, err := c.client.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	var deleted time.Time // when the old pod was seen deleting or gone
	eventually(t, 3*time.Minute, "the UDP flows to the pod on "+near.Name, func() error {
		if deleted.IsZero() {
			pod, err := c.client.CoreV1().Pods(ns).Get(ctx, old, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && pod.DeletionTimestamp != nil {
				deleted = time.Now()
			}
		}
		pods := c.pods(t, ns, "udp")
		if len(pods) != 1 || pods[0].Spec.NodeName != near.Name {
			return fmt.Errorf("%d pods, not yet only one on %s", len(pods), near.Name)
		}
		return lastAnswers(pods[0].Name)
	})
	switched := time.Since(deleted)
	t.Logf("the flows reached the new pod %v after the move, %v after the old pod %s was seen deleted",
		time.Since(moved).Round(100*time.Millisecond), switched.Round(100*time.Millisecond), old)
	if switched > 15*time.Second {
		t.Errorf("the flows took %v after the old pod's deletion to reach the new one, want a few seconds", switched.Round(time.Second))
	}
}

// With session affinity ClientIP, a client on each node keeps landing on
// the pod it first reached, on each family, when the Deployment scales
// from one pod to three (once each node's IPVS holds the three).
func TestTwoNodesSessionAffinityScaleUp(t *testing.T) {
	c := newCluster(t)
	nodes := c.twoOrMoreNodes(t)
	ns := c.namespace(t, "affinity")
	svc := c.serveHostname(t, ns, "sticky", 1, dualStack(corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP}))
	ctx := context.Background()
	type client struct{ pod, shell, vip string }
	var clients []client
	for _, node := range nodes[:2] {
		pod := "client-" + node.Name
		c.startPodOn(t, ns, pod, node.Name, false, corev1.Container{Name: "agnhost", Image: agnhost, Args: []string{"pause"}})
		shell := c.nodeShell(t, ns, node.Name)
		for _, ip := range svc.Spec.ClusterIPs {
			clients = append(clients, client{pod, shell, net.JoinHostPort(ip, "80")})
		}
	}
	// requests makes n requests from cl and returns the answers.
	requests := func(cl client, n int) ([]string, error) {
		out, err := c.exec(ctx, ns, cl.pod, fmt.Sprintf("for i in $(seq %d); do curl -s -g --connect-timeout 2 http://%s/hostname; echo; done", n, cl.vip))
		return strings.Fields(out), err
	}
	first := map[client]string{}
	for _, cl := range clients {
		eventually(t, time.Minute, cl.pod+" to "+cl.vip, func() error {
			answers, err := requests(cl, 1)
			if err == nil && (len(answers) != 1 || !strings.HasPrefix(answers[0], "sticky-")) {
				err = fmt.Errorf("answers %q", answers)
			}
			if err == nil {
				first[cl] = answers[0]
			}
			return err
		})
	}
	c.scale(t, ns, "sticky", 3)
	for _, cl := range clients {
		eventually(t, time.Minute, "three real servers for "+cl.vip+" seen by "+cl.shell, func() error {
			if n, err := c.servingRealServers(ctx, ns, cl.shell, cl.vip); err != nil || n != 3 {
				return fmt.Errorf("%d real servers (%v)", n, err)
			}
			return nil
		})
	}
	for _, pod := range c.pods(t, ns, "sticky") {
		t.Logf("pod %s on %s", pod.Name, pod.Spec.NodeName)
	}
	for _, cl := range clients {
		answers, err := requests(cl, 6)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range answers {
			if a != first[cl] {
				t.Errorf("%s to %s: answers %q after the scale-up, want only %s", cl.pod, cl.vip, answers, first[cl])
				break
			}
		}
		if len(answers) != 6 {
			t.Errorf("%s to %s: %d answers of 6: %q", cl.pod, cl.vip, len(answers), answers)
		}
	}
}
