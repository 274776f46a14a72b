//go:build clustertest

package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// A namespace tenant (a ServiceAccount's token, its Role granting every
// verb on Services, EndpointSlices, Deployments and pods in its own
// namespace only) writes each class of hostile input of
// docs/security.md: Services that name one virtual server twice and then
// change endpoints, external IPs on the API server's and the DNS
// Service's cluster IPs across a restart of every proxy, external IPs on
// the kubelet's and the proxy's own ports, a Service of 100 ports with
// oversized scheduler annotations, wide EndpointSlices, endpoints the API
// accepts and the kernel refuses, and a slice rewritten with invalid
// entries. Throughout, a pod in another namespace asks that namespace's
// Service, the API server's cluster IP and the DNS Service once a second,
// and every answer must come from them; no pod of ours restarts, another
// namespace's Service still follows its endpoints, and the tenant's
// object gets one Event per reason and five-minute window however often it
// is rewritten. make test-tenant runs it on two nodes; it is not in make
// test until it is green three runs in a row (issue 49).
func TestTenantCannotHarmOthers(t *testing.T) {
	c := newCluster(t)
	testutil.Require(t, c.proxy == "ipvsplane", "ipvsplane as the node's proxy")
	start := time.Now()
	ctx := context.Background()
	api, dns := c.clusterIP(t, "default", "kubernetes"), c.clusterIP(t, "kube-system", "kube-dns")
	// Every pod of ours, the whole time: a crash is seen whenever the
	// kubelet reports it, not only when the test looks.
	ourPodProblems := c.watchOurPods(t)
	t.Cleanup(func() {
		if t.Failed() {
			c.logProxies(t)
		}
	})

	// The other team: its Service and a pod asking it, the API server and
	// DNS, on the node whose node IP the tenant names.
	victimNS := c.namespace(t, "victim")
	victim := c.serveHostnameOn(t, victimNS, "victim", c.nodeName, 2, corev1.ServiceSpec{})
	shell := c.nodeShell(t, victimNS, c.nodeName)
	prober := c.startProber(t, victimNS, victim.Spec.ClusterIP, api, dns)

	// The tenant's namespace sorts before default and kube-system, as the
	// API server lists it at a restart.
	tenantNS := c.namespace(t, "billing")
	tenant := c.tenant(t, tenantNS)
	if _, err := tenant.client.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant listed Services in default: %v, want forbidden", err)
	}
	tenant.serveHostnameOn(t, tenantNS, "hijack", c.nodeName, 1, corev1.ServiceSpec{
		ExternalIPs: []string{api, dns},
		Ports: []corev1.ServicePort{
			{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
			{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolUDP},
		},
	})
	// The kubelet's and the proxy's ports on the node IP.
	tenant.createService(t, tenantNS, "node-ports", map[string]string{"app": "hijack"}, []string{c.nodeIP},
		servicePorts(corev1.ProtocolTCP, 8080, 10250, 10256))
	nodePort := tenant.oneVirtualServerTwice(t, tenantNS)
	tenant.createService(t, tenantNS, "annotated", map[string]string{"app": "hijack"}, nil, servicePorts(corev1.ProtocolTCP, 8080, portRange(2000, 100)...),
		withAnnotations(map[string]string{
			"ipvsplane.io/scheduler-flags": strings.Repeat("flag-1,", 200*1024/7),
			"ipvsplane.io/scheduler":       strings.Repeat("s", 50*1024),
		}))
	tenant.wideSlices(t, tenantNS, 20, 100)
	broadcast := c.nodeBroadcast(t, victimNS, shell)
	tenant.selectorless(t, tenantNS, "broadcast", []string{broadcast, "198.18.255.1"})
	bad := tenant.selectorless(t, tenantNS, "multicast", []string{"239.1.1.1", "239.1.1.2", "239.255.0.1", "198.18.255.2"})

	eventually(t, 2*time.Minute, "the tenant's node port "+strconv.Itoa(int(nodePort))+" programmed", func() error {
		out, err := c.exec(ctx, victimNS, shell, fmt.Sprintf("ipvsadm -Ln -t %s:%d", c.nodeIP, nodePort))
		if err == nil && !strings.Contains(out, "->") {
			err = fmt.Errorf("no real server: %s", out)
		}
		return err
	})
	// The endpoint change that crashed every node the node IP is on,
	// programmed before it is undone: the proxy went through it.
	contested := fmt.Sprintf("%s:%d", c.nodeIP, nodePort)
	tenant.scale(t, tenantNS, "b", 2)
	c.expectServing(t, victimNS, shell, contested, 2)
	tenant.scale(t, tenantNS, "b", 1)
	for i := range 10 {
		tenant.rewrite(t, tenantNS, bad, i)
	}
	c.expectOwnServers(t)

	c.restartProxies(t)
	c.awaitProbeRounds(t, victimNS, prober, api, 2) // through the new proxies' first full sync
	tenant.scale(t, tenantNS, "b", 2)
	c.expectServing(t, victimNS, shell, contested, 2)
	c.scale(t, victimNS, "victim", 3)
	c.expectServing(t, victimNS, shell, victim.Spec.ClusterIP+":80", 3)
	c.expectOwnServers(t)

	c.checkProbes(t, victimNS, prober, api, dns)
	if problems := ourPodProblems(); len(problems) > 0 {
		t.Errorf("the proxy's pods:\n%s", strings.Join(problems, "\n"))
	}
	c.expectOneEventPerReason(t, tenantNS, start)
}

// tenant returns the cluster as a tenant of ns sees it: a ServiceAccount
// whose Role grants every verb on what a team deploys, in ns only.
func (c *cluster) tenant(t *testing.T, ns string) *cluster {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "pods/log"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"*"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
		},
	}
	if _, err := c.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tenant", Namespace: ns}},
	}
	if _, err := c.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tenant := *c
	tenant.client = client
	return &tenant
}

// createService creates a Service of ports selecting selector (none:
// selectorless) with externalIPs, with options applied.
func (c *cluster) createService(t *testing.T, ns, name string, selector map[string]string, externalIPs []string, ports []corev1.ServicePort, options ...func(*corev1.Service)) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector, ExternalIPs: externalIPs, Ports: ports},
	}
	for _, o := range options {
		o(svc)
	}
	created, err := c.client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("service %s/%s: %v", ns, name, err)
	}
	return created
}

func withAnnotations(a map[string]string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations = a }
}

// servicePorts are TCP or UDP ports named p<port>, each to target.
func servicePorts(protocol corev1.Protocol, target int32, ports ...int32) []corev1.ServicePort {
	out := make([]corev1.ServicePort, len(ports))
	for i, p := range ports {
		out[i] = corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, TargetPort: intstr.FromInt32(target), Protocol: protocol}
	}
	return out
}

// portRange is n ports from first.
func portRange(first, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = first + int32(i)
	}
	return out
}

// oneVirtualServerTwice makes the pair of Services that crashed every
// node (issue 49): b, a NodePort whose port is its own node port with the
// node IP as an external IP (one port naming one virtual server twice),
// and a, which claims the same node IP and port as an external IP. It
// returns the node port.
func (c *cluster) oneVirtualServerTwice(t *testing.T, ns string) int32 {
	t.Helper()
	ctx := context.Background()
	b := c.serveHostnameOn(t, ns, "b", c.nodeName, 1, corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort})
	port := b.Spec.Ports[0].NodePort
	b.Spec.Ports[0].Port = port
	b.Spec.ExternalIPs = []string{c.nodeIP}
	if _, err := c.client.CoreV1().Services(ns).Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createService(t, ns, "a", map[string]string{"app": "b"}, []string{c.nodeIP}, servicePorts(corev1.ProtocolTCP, 8080, port))
	return port
}

// wideSlices makes a selectorless Service of `ports` ports, each served by
// a slice of its own of endpoints addresses (in 198.18.0.0/15, which no
// one answers): the shape whose cost grew with its square.
func (c *cluster) wideSlices(t *testing.T, ns string, ports, endpoints int) {
	t.Helper()
	numbers := portRange(3000, int32(ports))
	c.createService(t, ns, "wide", nil, nil, servicePorts(corev1.ProtocolTCP, 8080, numbers...))
	for i, p := range numbers {
		addrs := make([]string, endpoints)
		for j := range addrs {
			addrs[j] = fmt.Sprintf("198.18.%d.%d", i, j+1)
		}
		c.createSlice(t, ns, "wide", fmt.Sprintf("wide-%d", i), fmt.Sprintf("p%d", p), addrs)
	}
}

// selectorless makes a Service of port 80 whose one slice lists addrs,
// and returns the slice's name.
func (c *cluster) selectorless(t *testing.T, ns, name string, addrs []string) string {
	t.Helper()
	c.createService(t, ns, name, nil, nil, servicePorts(corev1.ProtocolTCP, 8080, 80))
	c.createSlice(t, ns, name, name, "p80", addrs)
	return name
}

func (c *cluster) createSlice(t *testing.T, ns, service, name, port string, addrs []string) {
	t.Helper()
	target := int32(8080)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &port, Port: &target}},
	}
	ready := true
	for _, a := range addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("endpointslice %s/%s: %v", ns, name, err)
	}
}

// rewrite gives the slice a new version with the same invalid entries.
func (c *cluster) rewrite(t *testing.T, ns, name string, i int) {
	t.Helper()
	ctx := context.Background()
	slice, err := c.client.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Annotations = map[string]string{"version": strconv.Itoa(i)}
	if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeBroadcast is the broadcast address of the node IP's subnet, which
// the API accepts as an endpoint and IPVS refuses with EINVAL.
func (c *cluster) nodeBroadcast(t *testing.T, ns, shell string) string {
	t.Helper()
	out, err := c.exec(context.Background(), ns, shell, "ip -o -4 addr show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" && strings.HasPrefix(f[i+1], c.nodeIP+"/") {
				prefix := netip.MustParsePrefix(f[i+1]).Masked()
				return lastAddr(prefix).String()
			}
		}
	}
	t.Fatalf("no address %s on the node:\n%s", c.nodeIP, out)
	return ""
}

// lastAddr is the last address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// clusterIP is a Service's cluster IP.
func (c *cluster) clusterIP(t *testing.T, ns, name string) string {
	t.Helper()
	svc, err := c.client.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// startProber starts a pod on the node that asks, once a second, the
// victim's Service for its host name, the API server's cluster IP for
// /version over TLS (an HTTP status, not a tenant pod's plain HTTP) and
// the DNS Service for the kubernetes Service, and prints one line a round,
// with the exit status of what got no answer (curl's 28 and dig's 9 are
// timeouts, curl's 35 a TLS handshake that a tenant's plain HTTP fails).
func (c *cluster) startProber(t *testing.T, ns, victim, api, dns string) string {
	t.Helper()
	script := fmt.Sprintf(`while :; do
v=$(curl -s -m 5 http://%s/hostname) || v=curl-exit-$?
a=$(curl -sk -m 5 -o /dev/null -w '%%{http_code}' https://%s/version) || a=curl-exit-$?
d=$(dig +short +time=5 +tries=1 @%s kubernetes.default.svc.cluster.local) || d=dig-exit-$?
echo "probe ${v:-EMPTY} ${a:-EMPTY} ${d:-EMPTY}"
sleep 1
done`, victim, netip.AddrPortFrom(netip.MustParseAddr(api), 443), dns)
	c.startPodOn(t, ns, "prober", c.nodeName, false, corev1.Container{Name: "prober", Image: agnhost, Command: []string{"sh", "-c", script}})
	c.awaitProbeRounds(t, ns, "prober", api, 1)
	return "prober"
}

// awaitProbeRounds waits until the prober has logged n more rounds (from
// its first answered one) than it had.
func (c *cluster) awaitProbeRounds(t *testing.T, ns, prober, api string, n int) {
	t.Helper()
	before, _, err := c.probeRounds(ns, prober, api)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%d more probe rounds", n), func() error {
		rounds, _, err := c.probeRounds(ns, prober, api)
		if err == nil && rounds < before+n {
			err = fmt.Errorf("%d rounds, want %d", rounds, before+n)
		}
		return err
	})
}

// expectServing waits until the TCP virtual server vip (address:port) has
// want real servers taking new connections on the node.
func (c *cluster) expectServing(t *testing.T, ns, shell, vip string, want int) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d serving real servers of %s", want, vip), func() error {
		n, err := c.servingRealServers(ctx, ns, shell, vip)
		if err == nil && n != want {
			out, _ := c.exec(ctx, ns, shell, "ipvsadm -Ln -t "+vip)
			err = fmt.Errorf("%d serving real servers:\n%s", n, out)
		}
		return err
	})
}

// probeRounds reads the prober's rounds from its first answered one (the
// ones before ran while the pod's own network came up, before the tenant
// wrote anything), and returns how many there were and the lines of
// those not answered by the victim's pods, the API server and DNS.
func (c *cluster) probeRounds(ns, prober, api string) (int, []string, error) {
	logs, err := c.kubectl(context.Background(), "-n", ns, "logs", prober)
	if err != nil {
		return 0, nil, err
	}
	var rounds int
	var bad []string
	for _, line := range strings.Split(logs, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "probe" {
			continue
		}
		answered := strings.HasPrefix(f[1], "victim-") && apiAnswered(f[2]) && f[3] == api
		if rounds == 0 && !answered {
			continue
		}
		rounds++
		if !answered {
			bad = append(bad, line)
		}
	}
	return rounds, bad, nil
}

// checkProbes reads the prober's lines: every one must have been answered
// by the victim's pods, the API server and DNS.
func (c *cluster) checkProbes(t *testing.T, ns, prober, api, dns string) {
	t.Helper()
	rounds, bad, err := c.probeRounds(ns, prober, api)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d probe rounds of the victim, the API server (%s) and DNS (%s); %d not answered by them", rounds, api, dns, len(bad))
	if len(bad) > 0 {
		t.Errorf("%d of %d rounds answered by someone else or not at all:\n%s", len(bad), rounds, strings.Join(bad, "\n"))
	}
}

// apiAnswered says whether an HTTP status is the API server's answer to
// /version (anonymous or not).
func apiAnswered(code string) bool {
	return code == "200" || code == "401" || code == "403"
}

// expectOwnServers checks that the node's own servers behind the node
// IP's protected ports answer: the kubelet over TLS and the proxy's
// health server with its JSON, not a tenant's pod.
func (c *cluster) expectOwnServers(t *testing.T) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + c.nodeIP + ":10250/healthz")
	if err != nil {
		t.Errorf("the kubelet on %s:10250: %v", c.nodeIP, err)
	} else {
		resp.Body.Close()
	}
	_, body, err := getStatus("http://" + c.nodeIP + ":10256/healthz")
	if err != nil || !strings.Contains(body, "lastUpdated") {
		t.Errorf("the proxy's health server on %s:10256: %q %v", c.nodeIP, body, err)
	}
}

func (c *cluster) proxyPods(t *testing.T) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, c.proxy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector := metav1.FormatLabelSelector(ds.Spec.Selector)
	list, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// restartProxies deletes every proxy pod and waits until the DaemonSet's
// new ones are Ready: every node's start window at once.
func (c *cluster) restartProxies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	old := map[string]bool{}
	for _, pod := range c.proxyPods(t) {
		old[pod.Name] = true
		if err := c.client.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := len(c.readyNodes(t))
	eventually(t, 4*time.Minute, "new proxy pods Ready", func() error {
		ready := 0
		for _, pod := range c.proxyPods(t) {
			if old[pod.Name] {
				return fmt.Errorf("%s still there", pod.Name)
			}
			for _, cond := range pod.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != nodes {
			return fmt.Errorf("%d of %d Ready", ready, nodes)
		}
		return nil
	})
}

// expectOneEventPerReason checks that ipvsplane's Events about the
// tenant's objects are one per object and reason in each SharedWindow
// since `since`, whichever node posted them and however often the object
// was rewritten.
func (c *cluster) expectOneEventPerReason(t *testing.T, ns string, since time.Time) {
	t.Helper()
	list, err := c.client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One Event per key and SharedWindow: as many windows as the test
	// spanned.
	windows := int(time.Now().UnixNano()/int64(events.SharedWindow)-since.UnixNano()/int64(events.SharedWindow)) + 1
	seen := map[string]int{}
	for _, e := range list.Items {
		if e.ReportingController != "ipvsplane" {
			continue
		}
		key := e.Regarding.Kind + "/" + e.Regarding.Name + " " + e.Reason
		seen[key]++
		t.Logf("event %s: %.200s", key, e.Note)
	}
	if len(seen) == 0 {
		t.Errorf("no Event from ipvsplane about the tenant's objects")
	}
	for key, n := range seen {
		if n > windows {
			t.Errorf("%d Events for %s, want one in each of the %d windows of %v the test spanned", n, key, windows, events.SharedWindow)
		}
	}
}

// logProxies logs the proxy pods' last lines, for a failed test.
func (c *cluster) logProxies(t *testing.T) {
	for _, pod := range c.proxyPods(t) {
		out, err := c.kubectl(context.Background(), "-n", "kube-system", "logs", "--tail=60", pod.Name)
		t.Logf("%s on %s (%v):\n%s", pod.Name, pod.Spec.NodeName, err, out)
	}
}
