//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readyNodes lists the cluster's nodes, each of which must be Ready.
func (c *cluster) readyNodes(t *testing.T) []corev1.Node {
	t.Helper()
	list, err := c.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range list.Items {
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		if !ready {
			t.Errorf("node %s is not Ready", node.Name)
		}
	}
	return list.Items
}

// twoOrMoreNodes is readyNodes for a test that needs two nodes at least:
// the TestTwoNodes ones, which the one-node make test-cluster leaves out.
func (c *cluster) twoOrMoreNodes(t *testing.T) []corev1.Node {
	t.Helper()
	nodes := c.readyNodes(t)
	if len(nodes) < 2 {
		t.Fatalf("%d Ready node; the test needs two (make cluster NODES=2)", len(nodes))
	}
	return nodes
}

// internalIPs are a node's addresses as it reported them, one per family.
func internalIPs(node corev1.Node) []string {
	var ips []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

// On two nodes (vmtest -node -nodes 2, make test-cluster-nodes; the
// one-node make test-cluster leaves it out, and on one node it fails):
// both Ready with
// pod ranges of their own and the proxy on each, a pod on the first
// reaching a pod pinned to the second through a ClusterIP on each family,
// and the first node, which has no endpoint, answering on the node port
// of each family (externalTrafficPolicy Cluster: to the other node).
func TestTwoNodes(t *testing.T) {
	c := newCluster(t)
	nodes := c.twoOrMoreNodes(t)
	seen := map[string]string{}
	for _, node := range nodes {
		if len(node.Spec.PodCIDRs) != 2 {
			t.Errorf("node %s has pod ranges %v, want one of each family", node.Name, node.Spec.PodCIDRs)
		}
		for _, cidr := range node.Spec.PodCIDRs {
			if other, ok := seen[cidr]; ok {
				t.Errorf("nodes %s and %s share the pod range %s", other, node.Name, cidr)
			}
			seen[cidr] = node.Name
		}
		t.Logf("node %s: addresses %v, pod ranges %v", node.Name, internalIPs(node), node.Spec.PodCIDRs)
	}
	ctx := context.Background()
	if c.proxy != "none" {
		ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, c.proxy, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if int(ds.Status.NumberReady) != len(nodes) {
			t.Errorf("daemonset %s: %d ready on %d nodes", c.proxy, ds.Status.NumberReady, len(nodes))
		}
	}
	near, far := nodes[0], nodes[1]
	ns := c.namespace(t, "twonodes")
	svc := c.serveHostnameOn(t, ns, "far", far.Name, 1, dualStack(corev1.ServiceSpec{
		Type:                  corev1.ServiceTypeNodePort,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
	}))
	c.startPodOn(t, ns, "client", near.Name, false, corev1.Container{Name: "agnhost", Image: agnhost, Args: []string{"pause"}})
	for _, ip := range svc.Spec.ClusterIPs {
		vip := net.JoinHostPort(ip, "80")
		eventually(t, time.Minute, "a pod on "+near.Name+" to "+vip, func() error {
			out, err := c.exec(ctx, ns, "client", "curl -s -g --connect-timeout 2 http://"+vip+"/hostname")
			if err == nil && !strings.HasPrefix(out, "far-") {
				err = fmt.Errorf("answer %q", out)
			}
			return err
		})
	}
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for _, ip := range internalIPs(near) {
		reachFromOutside(t, net.JoinHostPort(ip, nodePort), "far-")
	}
}
