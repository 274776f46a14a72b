//go:build vmtest

package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
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
	// store writes the services into the API server's etcd: created
	// through the API server, service N costs O(N) in v1.37's ClusterIP
	// allocator, and 44,000 of them would take hours under emulation.
	store serviceStore
}

// serviceStore writes services and deletes services and slices bypassing
// the API server's create and delete paths (controlplane.Remote).
type serviceStore interface {
	StoreServices(ctx context.Context, namespace string, svcs []v1.Service) error
	DeleteStored(ctx context.Context, resource, namespace string) error
}

// benchStoreBatch is how many services one StoreServices call writes.
const benchStoreBatch = 1024

// benchVIPOffset is where the benchmark's cluster IPs start in the API
// server's IPv4 service range: above the first addresses it hands out
// itself.
const benchVIPOffset = 16 << 8

// benchVIPs is how many services benchVIP has addresses for.
func benchVIPs() int {
	return 1<<(32-serviceCIDR(v1.IPv4Protocol).Bits()) - benchVIPOffset
}

// benchVIP is service i's cluster IP, the service range's address
// benchVIPOffset + i.
func benchVIP(i int) netip.Addr {
	base := serviceCIDR(v1.IPv4Protocol).Addr().As4()
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(base[:])+benchVIPOffset+uint32(i))
	return netip.AddrFrom4(a)
}

func benchServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// newBenchCluster makes the namespace and the proxies' Node.
func newBenchCluster(ctx context.Context, client kubernetes.Interface, store serviceStore, namespace string, endpoints int) (*benchCluster, error) {
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
	return &benchCluster{client: client, store: store, namespace: namespace, endpoints: endpoints}, nil
}

// grow brings the cluster to n services (stored, see benchCluster.store),
// each with one EndpointSlice of c.endpoints ready endpoints, each on a
// node of its own (created through the API server), and waits until the
// API server lists the services' IPAddresses (stored with them).
func (c *benchCluster) grow(ctx context.Context, n int) (growTimes, error) {
	var times growTimes
	from := len(c.vips)
	if n <= from {
		return times, nil
	}
	if n > benchVIPs() {
		return times, fmt.Errorf("%d services: the API server's service range has addresses for %d", n, benchVIPs())
	}
	start := time.Now()
	c.vips = append(c.vips, make([]netip.Addr, n-from)...)
	err := testutil.Parallel(ctx, 2, from/benchStoreBatch, (n+benchStoreBatch-1)/benchStoreBatch, func(ctx context.Context, b int) error {
		var svcs []v1.Service
		for i := max(from, b*benchStoreBatch); i < min(n, (b+1)*benchStoreBatch); i++ {
			svcs = append(svcs, *benchServiceObject(i))
			c.vips[i] = benchVIP(i)
		}
		return c.store.StoreServices(ctx, c.namespace, svcs)
	})
	if err != nil {
		return times, err
	}
	times.services, start = time.Since(start), time.Now()
	if err := testutil.Parallel(ctx, 16, from, n, func(ctx context.Context, i int) error {
		_, err := c.client.DiscoveryV1().EndpointSlices(c.namespace).Create(ctx, benchSlice(i, c.endpoints), metav1.CreateOptions{})
		return err
	}); err != nil {
		return times, err
	}
	times.slices, start = time.Since(start), time.Now()
	err = c.waitAddressesListed(ctx, n)
	times.listed = time.Since(start)
	return times, err
}

// growTimes is how long grow took to store the services, to create their
// slices, and then to see their IPAddresses listed.
type growTimes struct{ services, slices, listed time.Duration }

// waitAddressesListed waits until the API server lists an IPAddress for
// each of the n services of c.namespace (StoreServices stores them), so
// that its ClusterIP repair loop finds nothing to do while a proxy is
// measured. The count of all addresses, one cheap request, gates the
// count of this namespace's.
func (c *benchCluster) waitAddressesListed(ctx context.Context, n int) error {
	recorded := 0
	for {
		all, err := c.client.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		total := len(all.Items)
		if all.RemainingItemCount != nil {
			total += int(*all.RemainingItemCount)
		}
		if total >= n {
			if recorded, err = c.addressesOfNamespace(ctx); err != nil || recorded >= n {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("IPAddresses of the benchmark's services: %d of %d recorded: %w", recorded, n, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// addressesOfNamespace counts the IPAddresses whose parent is a service of
// c.namespace.
func (c *benchCluster) addressesOfNamespace(ctx context.Context) (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: 5000}
	for {
		list, err := c.client.NetworkingV1().IPAddresses().List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, a := range list.Items {
			if ref := a.Spec.ParentRef; ref != nil && ref.Resource == "services" && ref.Namespace == c.namespace {
				n++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

// delete removes every service and slice grow made, straight from etcd
// (see controlplane.ControlPlane.DeleteStored).
func (c *benchCluster) delete(ctx context.Context) error {
	if err := c.store.DeleteStored(ctx, "endpointslices", c.namespace); err != nil {
		return err
	}
	return c.store.DeleteStored(ctx, "services", c.namespace)
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

// benchServiceObject is service i, with its cluster IP and node port set as
// the API server would have allocated them: one in ten is a NodePort
// service, up to 2,000 of them (the node-port range holds 2,768).
func benchServiceObject(i int) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: benchServiceName(i)},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: benchVIP(i).String(),
			Ports:     []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if i%10 == 0 && i/10 < 2000 {
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = int32(30000 + i/10)
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
