package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// loadBalancerFinalizer is the cloud service controller's finalizer on a
// Service whose load balancer exists (k8s.io/cloud-provider's
// servicehelper.LoadBalancerCleanupFinalizer); upstream's LoadBalancers
// specs wait for it to come and go.
const loadBalancerFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// loadBalancer is vmtest -node -load-balancers: the cloud's load balancer
// that upstream's `[Feature:LoadBalancer]` specs need, played by the
// namespace the nodes' link ends in. Every second it gives each Service of
// type LoadBalancer (without a loadBalancerClass) an address per IP family
// from the load balancer ranges in status.loadBalancer.ingress, keeps the
// cleanup finalizer on it while it has one, and routes the address, in
// the namespace, to the nodes a cloud's load balancer would send to: every
// Ready node for externalTrafficPolicy Cluster; for Local, the nodes whose
// health-check node port answers 200; with ClientIP session affinity, the
// first of those alone. Several nodes make an ECMP route, hashed on ports
// (fib_multipath_hash_policy 1), so one client's connections spread over
// them. A Service that is no longer of type
// LoadBalancer, or is being deleted, loses its address, its route and the
// finalizer. The namespace's route of the whole ranges to the first node
// stays for the addresses the tests pick themselves.
type loadBalancer struct {
	client kubernetes.Interface
	vms    []*nodeVM
	health *http.Client
	// setRoute changes the namespace's route of an address (ipRoute).
	setRoute func(op string, a netip.Addr, hops []netip.Addr) error
	// routed is each address's installed next hops.
	routed map[netip.Addr][]netip.Addr
	// failures counts the health checks each node failed in a row, per
	// Service, as of the last round; a node starts healthy.
	failures map[healthKey]int
}

func newLoadBalancer(client kubernetes.Interface, vms []*nodeVM) *loadBalancer {
	return &loadBalancer{
		client:   client,
		vms:      vms,
		health:   &http.Client{Timeout: time.Second},
		setRoute: ipRoute,
		routed:   map[netip.Addr][]netip.Addr{},
		failures: map[healthKey]int{},
	}
}

// startLoadBalancer runs the cluster's load balancer until stop is called.
func (n *node) startLoadBalancer() (stop func(), err error) {
	client, err := kubernetes.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		newLoadBalancer(client, n.vms).run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// run reconciles every second until ctx ends; an error is printed and the
// next round tries again.
func (lb *loadBalancer) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		if err := lb.reconcile(ctx); err != nil && ctx.Err() == nil && err.Error() != last {
			fmt.Fprintf(os.Stderr, "vmtest: load balancer: %v\n", err)
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// reconcile makes the Services' addresses, finalizers and routes what
// the cluster asks for.
func (lb *loadBalancer) reconcile(ctx context.Context) error {
	services, err := lb.client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	ready, err := lb.readyNodes(ctx)
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	used := map[netip.Addr]bool{}
	for _, svc := range services.Items {
		for _, a := range ingressAddrs(&svc) {
			used[a] = true
		}
	}
	want := map[netip.Addr][]netip.Addr{}
	// This round's health-check failures replace the last round's, so
	// Services and nodes that went are forgotten.
	failures := map[healthKey]int{}
	// A Service that fails (an update that conflicted, mostly) waits for
	// the next round; the others go on.
	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		if !served(svc) {
			errs = append(errs, lb.release(ctx, svc))
			continue
		}
		addrs, err := lb.provide(ctx, svc, used)
		if err != nil {
			errs = append(errs, err)
			lb.keepRoutes(svc, want)
			continue
		}
		targets := lb.targets(ctx, svc, ready, failures)
		for _, a := range addrs {
			want[a] = nextHops(targets, a.Is6())
		}
	}
	lb.failures = failures
	return errors.Join(append(errs, lb.route(want))...)
}

// ingressAddrs are the addresses in svc's load balancer status.
func ingressAddrs(svc *corev1.Service) []netip.Addr {
	var addrs []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// keepRoutes keeps the routes svc's addresses have, for a round that
// could not update it.
func (lb *loadBalancer) keepRoutes(svc *corev1.Service, want map[netip.Addr][]netip.Addr) {
	for _, a := range ingressAddrs(svc) {
		if lb.routed[a] != nil {
			want[a] = lb.routed[a]
		}
	}
}

// served is whether svc gets a load balancer from us.
func served(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && svc.DeletionTimestamp == nil
}

// provide puts the finalizer and an address per IP family on svc,
// keeping those it has, and returns its addresses in the ranges.
func (lb *loadBalancer) provide(ctx context.Context, svc *corev1.Service, used map[netip.Addr]bool) ([]netip.Addr, error) {
	if !slices.Contains(svc.Finalizers, loadBalancerFinalizer) {
		svc.Finalizers = append(svc.Finalizers, loadBalancerFinalizer)
		updated, err := lb.client.CoreV1().Services(svc.Namespace).Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("service %s/%s: adding the finalizer: %w", svc.Namespace, svc.Name, err)
		}
		*svc = *updated
	}
	var addrs []netip.Addr
	have := ingressAddrs(svc)
	ingress := slices.Clone(svc.Status.LoadBalancer.Ingress)
	for _, family := range svc.Spec.IPFamilies {
		ipv6 := family == corev1.IPv6Protocol
		i := slices.IndexFunc(have, func(a netip.Addr) bool { return a.Is6() == ipv6 })
		var a netip.Addr
		if i >= 0 {
			a = have[i]
		} else {
			var err error
			if a, err = allocate(ipv6, used); err != nil {
				return nil, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
			}
			used[a] = true
			ingress = append(ingress, corev1.LoadBalancerIngress{IP: a.String()})
		}
		if inRanges(a) {
			addrs = append(addrs, a)
		}
	}
	if len(ingress) != len(svc.Status.LoadBalancer.Ingress) {
		svc.Status.LoadBalancer.Ingress = ingress
		if _, err := lb.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("service %s/%s: setting its load balancer's address: %w", svc.Namespace, svc.Name, err)
		}
	}
	return addrs, nil
}

// release takes the address and the finalizer from a Service no longer
// served; one that never had the finalizer is not ours.
func (lb *loadBalancer) release(ctx context.Context, svc *corev1.Service) error {
	i := slices.Index(svc.Finalizers, loadBalancerFinalizer)
	if i < 0 {
		return nil
	}
	if svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
		svc.Status.LoadBalancer.Ingress = nil
		updated, err := lb.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("service %s/%s: clearing its load balancer's address: %w", svc.Namespace, svc.Name, err)
		}
		*svc = *updated
		i = slices.Index(svc.Finalizers, loadBalancerFinalizer)
	}
	svc.Finalizers = slices.Delete(svc.Finalizers, i, i+1)
	if _, err := lb.client.CoreV1().Services(svc.Namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("service %s/%s: removing the finalizer: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// The ranges the load balancer gives addresses from: the upper part of
// the load balancer ranges, clear of the addresses tests pick themselves.
var (
	loadBalancerPool  = netip.MustParsePrefix("192.0.2.128/25")
	loadBalancerPool6 = netip.MustParsePrefix("2001:db8::8000/113")
)

func inRanges(a netip.Addr) bool {
	return loadBalancerPool.Contains(a) || loadBalancerPool6.Contains(a)
}

// allocate is the lowest address of the family's pool not in used.
func allocate(ipv6 bool, used map[netip.Addr]bool) (netip.Addr, error) {
	pool := loadBalancerPool
	if ipv6 {
		pool = loadBalancerPool6
	}
	for a := pool.Addr().Next(); pool.Contains(a); a = a.Next() {
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free load balancer address in %s", pool)
}

// readyNodes are the VMs whose node is Ready.
func (lb *loadBalancer) readyNodes(ctx context.Context) ([]*nodeVM, error) {
	nodes, err := lb.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var ready []*nodeVM
	for _, vm := range lb.vms {
		i := slices.IndexFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == vm.name })
		if i >= 0 && slices.ContainsFunc(nodes.Items[i].Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			ready = append(ready, vm)
		}
	}
	return ready, nil
}

// targets are the nodes svc's traffic goes to: all Ready ones, or for
// externalTrafficPolicy Local those its health checks pass, or all Ready
// ones again when none passes (a cloud's load balancer fails open). With
// ClientIP session affinity only the first of them: a cloud's load
// balancer then keeps a client on one node (GCE's target pools hash on the
// client's address), as each node's affinity holds only for the clients
// it sees.
func (lb *loadBalancer) targets(ctx context.Context, svc *corev1.Service, ready []*nodeVM, failures map[healthKey]int) []*nodeVM {
	targets := ready
	if port := svc.Spec.HealthCheckNodePort; svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && port != 0 {
		targets = lb.passing(ctx, svc, ready, port, failures)
		if len(targets) == 0 {
			targets = ready
		}
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && len(targets) > 1 {
		targets = targets[:1]
	}
	return targets
}

// unhealthyAfter is how many health checks in a row a node must fail to
// be taken out, as a cloud's unhealthy threshold: one slow answer of an
// emulated node does not take it out.
const unhealthyAfter = 2

// passing checks each node's health-check node port for svc at once and
// returns the nodes that are healthy: those that answered 200, or failed
// fewer than unhealthyAfter checks in a row since. It records each node's
// failures in a row in failures.
func (lb *loadBalancer) passing(ctx context.Context, svc *corev1.Service, vms []*nodeVM, port int32, failures map[healthKey]int) []*nodeVM {
	ok := make([]bool, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = lb.healthy(ctx, vm, port)
		}()
	}
	wg.Wait()
	var passing []*nodeVM
	for i, vm := range vms {
		key := healthKey{types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, vm.name}
		failed := 0
		if !ok[i] {
			failed = lb.failures[key] + 1
		}
		failures[key] = failed
		if failed < unhealthyAfter {
			passing = append(passing, vm)
		}
	}
	return passing
}

// healthKey is one node's health checks for one Service.
type healthKey struct {
	svc  types.NamespacedName
	node string
}

func (lb *loadBalancer) healthy(ctx context.Context, vm *nodeVM, port int32) bool {
	url := "http://" + netip.AddrPortFrom(vm.ip, uint16(port)).String() + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := lb.health.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func nextHops(vms []*nodeVM, ipv6 bool) []netip.Addr {
	hops := make([]netip.Addr, 0, len(vms))
	for _, vm := range vms {
		if ipv6 {
			hops = append(hops, vm.ip6)
		} else {
			hops = append(hops, vm.ip)
		}
	}
	return hops
}

// route installs want's routes in the namespace and removes those no
// longer wanted; an address with no next hop gets no route of its own.
func (lb *loadBalancer) route(want map[netip.Addr][]netip.Addr) error {
	for a, hops := range want {
		if len(hops) == 0 {
			delete(want, a)
		}
	}
	for a := range lb.routed {
		if _, ok := want[a]; ok {
			continue
		}
		if err := lb.setRoute("del", a, nil); err != nil {
			return err
		}
		delete(lb.routed, a)
	}
	for a, hops := range want {
		if slices.Equal(lb.routed[a], hops) {
			continue
		}
		if err := lb.setRoute("replace", a, hops); err != nil {
			return err
		}
		// Timed, to be read beside the traffic a spec logs.
		fmt.Fprintf(os.Stderr, "vmtest: load balancer: %s: %s via %v\n", time.Now().UTC().Format("15:04:05.000"), a, hops)
		lb.routed[a] = hops
	}
	return nil
}

// The namespace's address as the load balancers' client, outside the
// nodes' subnets: upstream's specs take a client address within a /16
// (IPv6: /64) of a node's for one the proxy masqueraded
// ("ExternalTrafficPolicy: Local should work for type=LoadBalancer"), and
// the namespace's address on the nodes' link is such an address. The
// nodes' default routes lead to the namespace, so replies come back.
var (
	loadBalancerClient  = netip.MustParseAddr("203.0.113.2")
	loadBalancerClient6 = netip.MustParseAddr("2001:db8:ff::2")
)

// ipRoute runs ip route op for the host route of a through hops, from the
// load balancers' client address.
func ipRoute(op string, a netip.Addr, hops []netip.Addr) error {
	args := []string{"route", op, netip.PrefixFrom(a, a.BitLen()).String()}
	if op != "del" {
		src := loadBalancerClient
		if a.Is6() {
			src = loadBalancerClient6
		}
		args = append(args, "src", src.String())
	}
	if len(hops) == 1 {
		args = append(args, "via", hops[0].String())
	} else {
		for _, hop := range hops {
			args = append(args, "nexthop", "via", hop.String())
		}
	}
	return runIP(args...)
}

// loadBalancerSysctls hash the namespace's multipath routes on ports too,
// so that one client's connections spread over a load balancer's nodes.
var loadBalancerSysctls = []string{"net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"}
