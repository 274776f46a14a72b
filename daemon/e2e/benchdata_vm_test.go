//go:build vmtest

package e2e

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/daemon/internal/kubetest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// benchNode is the Node the proxies under test run as.
const benchNode = "bench-node"

// benchCluster is the benchmark's Services and EndpointSlices in one
// namespace, grown size by size: the proxies see every namespace, so one
// set that grows costs less than a set per size that must be deleted.
type benchCluster struct {
	client    kubernetes.Interface
	namespace string
	// vips holds each service's cluster IP, by index.
	vips []netip.Addr
	// endpoints is the number of ready endpoints of each service, all in
	// one EndpointSlice.
	endpoints int
}

func benchServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// newBenchCluster makes the namespace and the proxies' Node.
func newBenchCluster(ctx context.Context, client kubernetes.Interface, namespace string, endpoints int) (*benchCluster, error) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: benchNode},
		Status: v1.NodeStatus{
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.2.15"}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return &benchCluster{client: client, namespace: namespace, endpoints: endpoints}, nil
}

// grow creates services up to n, each with one EndpointSlice of
// c.endpoints ready endpoints, each on a node of its own; one in ten is a
// NodePort service, up to 2,000 of them (the node-port range holds
// 2,768).
func (c *benchCluster) grow(ctx context.Context, n int) error {
	from := len(c.vips)
	if n <= from {
		return nil
	}
	c.vips = append(c.vips, make([]netip.Addr, n-from)...)
	return testutil.Parallel(ctx, 16, from, n, func(ctx context.Context, i int) error {
		svc, err := c.client.CoreV1().Services(c.namespace).Create(ctx, benchServiceObject(i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if c.vips[i], err = netip.ParseAddr(svc.Spec.ClusterIP); err != nil {
			return fmt.Errorf("service %s: cluster IP %q: %w", svc.Name, svc.Spec.ClusterIP, err)
		}
		_, err = c.client.DiscoveryV1().EndpointSlices(c.namespace).Create(ctx, benchSlice(i, c.endpoints), metav1.CreateOptions{})
		return err
	})
}

// delete removes every service and slice grow made.
func (c *benchCluster) delete(ctx context.Context) error {
	if err := c.client.DiscoveryV1().EndpointSlices(c.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	return testutil.Parallel(ctx, 16, 0, len(c.vips), func(ctx context.Context, i int) error {
		err := c.client.CoreV1().Services(c.namespace).Delete(ctx, benchServiceName(i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// moveEndpoint gives endpoint 0 of service i the address to, with the
// trigger time the proxies' network-programming latency counts from.
func (c *benchCluster) moveEndpoint(ctx context.Context, i int, to netip.Addr) error {
	slices := c.client.DiscoveryV1().EndpointSlices(c.namespace)
	s, err := slices.Get(ctx, benchServiceName(i)+"-1", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Endpoints[0].Addresses = []string{to.String()}
	_, err = slices.Update(ctx, kubetest.Triggered(s), metav1.UpdateOptions{})
	return err
}

func benchServiceObject(i int) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: benchServiceName(i)},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if i%10 == 0 && i/10 < 2000 {
		svc.Spec.Type = v1.ServiceTypeNodePort
	}
	return svc
}

// benchSlice is service i's slice of n endpoints (at most 100, as the
// EndpointSlice controller fills them).
func benchSlice(i, n int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   benchServiceName(i) + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: benchServiceName(i)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for j := range n {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{netip.AddrFrom4([4]byte{10, 244, byte(j), byte(i%250 + 1)}).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			NodeName:   ptr(fmt.Sprintf("node-%d", j)),
		})
	}
	return s
}
