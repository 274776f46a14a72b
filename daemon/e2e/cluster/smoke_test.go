//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// nodetools is hack/build-images' image of the node's readers (ipvsadm,
// ipset, nft, conntrack, ip, curl), run privileged in the node's network
// namespace to see the kernel state the proxy wrote.
const nodetools = "ipvsplane.test/nodetools:1"

// nodeShell starts a privileged pod in the network namespace of the node
// named node (or the scheduler's pick if empty) for reading its kernel
// state, and returns the pod's name.
func (c *cluster) nodeShell(t *testing.T, ns, node string) string {
	t.Helper()
	name := "node-shell"
	if node != "" {
		name += "-" + node
	}
	c.startPodOn(t, ns, name, node, true, corev1.Container{Name: "tools", Image: nodetools, ImagePullPolicy: corev1.PullNever})
	return name
}

// servingRealServers counts the real servers of the TCP virtual server
// vip (address:port) taking new connections, as the node shell's ipvsadm
// lists them: weight above 0 (a terminating pod's drains at weight 0
// while connections last).
func (c *cluster) servingRealServers(ctx context.Context, ns, shell, vip string) (int, error) {
	out, err := c.exec(ctx, ns, shell, "ipvsadm -Ln -t "+vip)
	return len(servingRealServer.FindAllString(out, -1)), err
}

// servingRealServer is one line of servingRealServers.
var servingRealServer = regexp.MustCompile(`(?m)^\s+->\s+\S+:8080\s+\w+\s+[1-9]`)

// scale sets the Deployment's replicas and waits until they are Ready.
func (c *cluster) scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	scale, err := c.client.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = replicas
	if _, err := c.client.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReplicasReady(t, ns, name, replicas)
}

// The proxy from deploy/ is Ready, answers its health and metrics ports on
// the node, and has logged no error.
func TestProxyRunning(t *testing.T) {
	c := newCluster(t)
	testutil.Require(t, c.proxy != "none", "a proxy on the node (vmtest -node -proxy ipvsplane or kube-proxy)")
	ctx := context.Background()
	nodes := int32(len(c.readyNodes(t)))
	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, c.proxy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Status.NumberReady != nodes || ds.Status.DesiredNumberScheduled != nodes {
		t.Fatalf("daemonset %s: %d of %d ready, want one on each of %d nodes", c.proxy, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, nodes)
	}
	if c.proxy == "ipvsplane" && c.install == "helm" {
		if by := ds.Labels["app.kubernetes.io/managed-by"]; by != "Helm" {
			t.Errorf("daemonset %s is managed by %q, not Helm", c.proxy, by)
		}
		t.Logf("daemonset %s installed by helm, chart %s", c.proxy, ds.Labels["helm.sh/chart"])
	}
	ns := c.namespace(t, "proxy")
	shell := c.nodeShell(t, ns, "")
	for _, path := range []string{":10256/healthz", ":10256/livez", ":10249/metrics"} {
		out, err := c.exec(ctx, ns, shell, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1"+path)
		if err != nil || out != "200" {
			t.Errorf("GET %s on the node: %q %v", path, out, err)
		}
	}
	metrics, err := c.exec(ctx, ns, shell, "curl -s http://127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, "kubeproxy_sync_proxy_rules_duration_seconds") {
		t.Errorf("metrics lack kubeproxy_sync_proxy_rules_duration_seconds:\n%.2000s", metrics)
	}
	logs, err := c.kubectl(ctx, "-n", "kube-system", "logs", "daemonset/"+c.proxy)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.HasPrefix(line, "E") {
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s logged %d errors:\n%s", c.proxy, len(bad), strings.Join(bad, "\n"))
	}
	t.Logf("%s: %d log lines, none an error", c.proxy, strings.Count(logs, "\n"))
}

// The proxy reaches the API server through a name only the node's
// resolver knows (vmtest writes controlplane.ClusterHostName into the
// nodes' /etc/hosts; the cluster DNS does not answer for it), as an
// operator's apiServerHost or kubeadm's controlPlaneEndpoint often is. A
// proxy resolving through the cluster DNS Service would wait on an address
// only it can program: on a node no proxy had programmed yet it never
// started, so every proxy pod is Ready without a single restart.
func TestProxyResolvesAPIServerThroughNode(t *testing.T) {
	c := newCluster(t)
	testutil.Require(t, c.proxy == "ipvsplane", "ipvsplane on the nodes (make test-cluster)")
	ctx := context.Background()
	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, c.proxy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := ""
	for _, env := range ds.Spec.Template.Spec.Containers[0].Env {
		if ref := env.ValueFrom; env.Name == "KUBERNETES_SERVICE_HOST" && ref != nil && ref.ConfigMapKeyRef != nil {
			cm, err := c.client.CoreV1().ConfigMaps("kube-system").Get(ctx, ref.ConfigMapKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			host = cm.Data[ref.ConfigMapKeyRef.Key]
		}
	}
	if host != controlplane.ClusterHostName {
		t.Fatalf("the proxy is given the API server as %q, want the name %q", host, controlplane.ClusterHostName)
	}
	ns := c.namespace(t, "resolver")
	c.runPod(t, ns, "client", "pause")
	// A reply first (a timeout says nothing of the name), then what it
	// holds: no address.
	var reply string
	eventually(t, time.Minute, "a reply from the cluster DNS", func() error {
		out, err := c.exec(ctx, ns, "client", "dig +time=2 +tries=1 +noall +comments "+host)
		if err == nil && !strings.Contains(out, "->>HEADER<<-") {
			err = fmt.Errorf("no reply: %q", out)
		}
		reply = out
		return err
	})
	if !strings.Contains(reply, "ANSWER: 0,") {
		t.Fatalf("the cluster DNS answers for %s, so the test proves nothing:\n%s", host, reply)
	}
	pods, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(c.readyNodes(t)) {
		t.Fatalf("%d proxy pods for %d nodes", len(pods.Items), len(c.readyNodes(t)))
	}
	for _, pod := range pods.Items {
		for _, st := range pod.Status.ContainerStatuses {
			if !st.Ready || st.RestartCount > 0 {
				t.Errorf("pod %s on %s: ready %v, %d restarts", pod.Name, pod.Spec.NodeName, st.Ready, st.RestartCount)
			}
		}
	}
	t.Logf("%d proxy pods Ready, none restarted, reaching the API server as %s, which the cluster DNS does not know", len(pods.Items), host)
}

// CoreDNS answers through its cluster IP over UDP and TCP, and a pod
// reaches a Service by its name.
func TestDNSAndServiceByName(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "dns")
	c.serveHostname(t, ns, "hostnames", 2, corev1.ServiceSpec{})
	c.runPod(t, ns, "client", "pause")
	ctx := context.Background()
	for _, transport := range []string{"+notcp", "+tcp"} {
		eventually(t, time.Minute, "dig "+transport, func() error {
			out, err := c.exec(ctx, ns, "client", "dig "+transport+" +short +time=2 +tries=1 kubernetes.default.svc.cluster.local")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "10.96.0.1" {
				return fmt.Errorf("answer %q, want 10.96.0.1", out)
			}
			return nil
		})
	}
	seen := map[string]bool{}
	eventually(t, time.Minute, "both backends by name", func() error {
		out, err := c.exec(ctx, ns, "client", "curl -s --connect-timeout 2 http://hostnames/hostname")
		if err != nil {
			return err
		}
		if strings.HasPrefix(out, "hostnames-") {
			seen[out] = true
		}
		if len(seen) < 2 {
			return fmt.Errorf("answers from %v", seen)
		}
		return nil
	})
}

// reachFromOutside waits until GET http://addr/hostname from this test, a
// client outside the node, answers with a pod name starting with prefix.
func reachFromOutside(t *testing.T, addr, prefix string) {
	t.Helper()
	eventually(t, time.Minute, "GET http://"+addr+"/hostname", func() error {
		body, err := get("http://" + addr + "/hostname")
		if err == nil && !strings.HasPrefix(body, prefix) {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
}

// A NodePort Service answers a client outside the node: this test,
// across the link to the node's eth0.
func TestNodePortFromOutside(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "nodeport")
	c.serveHostname(t, ns, "np", 2, corev1.ServiceSpec{
		Type:  corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080, Protocol: corev1.ProtocolTCP}},
	})
	reachFromOutside(t, net.JoinHostPort(c.nodeIP, "30080"), "np-")
}

// A LoadBalancer Service (its status set by the test, as a cloud
// controller would) answers a client outside the node: this test, whose
// network routes the load balancer's address to the node.
func TestLoadBalancerFromOutside(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "lb")
	svc := c.serveHostname(t, ns, "lb", 2, corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer})
	lb := c.lbPrefix.Addr().Next().String()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lb}}
	if _, err := c.client.CoreV1().Services(ns).UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reachFromOutside(t, lb, "lb-")
}

// A dual-stack Service answers on both families: a pod reaches its IPv6
// cluster IP, and a client outside the node its IPv6 node port and load
// balancer.
func TestDualStackService(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "dualstack")
	svc := c.serveHostname(t, ns, "ds", 2, dualStack(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}))
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("cluster IPs %v, want one of each family", svc.Spec.ClusterIPs)
	}
	ctx := context.Background()
	lb6 := c.lbPrefix6.Addr().Next().String()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: c.lbPrefix.Addr().Next().Next().String()}, {IP: lb6}}
	if _, err := c.client.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.runPod(t, ns, "client", "pause")
	vip6 := net.JoinHostPort(svc.Spec.ClusterIPs[1], "80")
	eventually(t, time.Minute, "a pod to "+vip6, func() error {
		out, err := c.exec(ctx, ns, "client", "curl -s -g --connect-timeout 2 http://"+vip6+"/hostname")
		if err == nil && !strings.HasPrefix(out, "ds-") {
			err = fmt.Errorf("answer %q", out)
		}
		return err
	})
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for _, addr := range []string{net.JoinHostPort(c.nodeIP6, nodePort), net.JoinHostPort(lb6, "80")} {
		reachFromOutside(t, addr, "ds-")
	}
}

// Scaling a Deployment changes the Service's serving real servers in
// IPVS; the time from the scale request to the kernel holding them is
// logged.
func TestScaleChangesRealServers(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "scale")
	svc := c.serveHostname(t, ns, "scaled", 1, corev1.ServiceSpec{})
	shell := c.nodeShell(t, ns, "")
	ctx := context.Background()
	vip := svc.Spec.ClusterIP + ":80"
	count := func() (int, error) { return c.servingRealServers(ctx, ns, shell, vip) }
	eventually(t, time.Minute, "one real server for "+vip, func() error {
		if n, err := count(); err != nil || n != 1 {
			return fmt.Errorf("%d real servers (%v)", n, err)
		}
		return nil
	})
	for _, replicas := range []int32{3, 1} {
		start := time.Now()
		c.scale(t, ns, "scaled", replicas)
		ready := time.Since(start)
		eventually(t, time.Minute, fmt.Sprintf("%d real servers for %s", replicas, vip), func() error {
			if n, err := count(); err != nil || n != int(replicas) {
				return fmt.Errorf("%d real servers (%v)", n, err)
			}
			return nil
		})
		t.Logf("scaled to %d: pods Ready after %v, IPVS holding %d real servers after %v (one exec of ipvsadm is part of it)",
			replicas, ready.Round(10*time.Millisecond), replicas, time.Since(start).Round(10*time.Millisecond))
	}
}
