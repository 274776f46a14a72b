//go:build clustertest

package cluster

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod with a hostPort on a Service's port (an ingress controller's
// DaemonSet on 80) makes the CNI portmap plugin DNAT port 80 of every
// local address to it, kube-ipvs0's included. The Service's cluster IP,
// load-balancer IP and external IP still reach the Service, from a pod,
// from the node and from outside; the host port still reaches its pod on
// the node's own address (docs/neighbours.md).
func TestHostPortOnAServicePort(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "hostport")
	ctx := context.Background()
	lb, external := addrAfter(c.lbPrefix.Addr(), 10), addrAfter(c.lbPrefix.Addr(), 11)
	svc := c.serveHostname(t, ns, "svc", 2, corev1.ServiceSpec{
		Type:        corev1.ServiceTypeLoadBalancer,
		ExternalIPs: []string{external},
	})
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lb}}
	if _, err := c.client.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The host port is on the node whose address the test dials; with two
	// nodes the scheduler may pick the other one.
	c.startPodOn(t, ns, "hostport", c.nodeName, false, corev1.Container{
		Name: "netexec", Image: agnhost, Args: []string{"netexec", "--http-port=8080"},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 80, Protocol: corev1.ProtocolTCP}},
	})
	c.runPod(t, ns, "client", "pause")
	shell := c.nodeShell(t, ns, "")

	curl := func(pod, addr string) func() (string, error) {
		return func() (string, error) {
			return c.exec(ctx, ns, pod, "curl -s --connect-timeout 2 http://"+addr+"/hostname")
		}
	}
	outside := func(addr string) func() (string, error) {
		return func() (string, error) { return get("http://" + addr + "/hostname") }
	}
	vip := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	for _, p := range []struct {
		what   string
		get    func() (string, error)
		prefix string
	}{
		{"a pod to the cluster IP " + vip, curl("client", vip), "svc-"},
		{"the node to the cluster IP " + vip, curl(shell, vip), "svc-"},
		{"outside to the load-balancer IP " + lb, outside(lb), "svc-"},
		{"outside to the external IP " + external, outside(external), "svc-"},
		{"outside to the host port on " + c.nodeIP, outside(net.JoinHostPort(c.nodeIP, "80")), "hostport"},
	} {
		// Once the path answers, every answer comes from the same side:
		// the Service's pods, or the host port's.
		eventually(t, time.Minute, p.what, func() error {
			_, err := p.get()
			return err
		})
		for range 6 {
			body, err := p.get()
			if err != nil || !strings.HasPrefix(body, p.prefix) {
				t.Errorf("%s: got %q, %v; want %s...", p.what, body, err, p.prefix)
				break
			}
		}
	}
}

// addrAfter is the address n after a.
func addrAfter(a netip.Addr, n int) string {
	for range n {
		a = a.Next()
	}
	return a.String()
}
