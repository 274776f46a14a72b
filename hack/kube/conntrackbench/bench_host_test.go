//go:build hosttest

package conntrackbench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy"
	kpconntrack "k8s.io/kubernetes/pkg/proxy/conntrack"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The table: services UDP services on port 53, the first nodePorts of
// them with a node port, each with three serving endpoints and
// flowsPerService flows, all but one answered by its endpoints and one by
// an endpoint it no longer has: a reconciliation deletes one flow in
// flowsPerService.
const (
	services        = 10000
	nodePorts       = 2000
	flowsPerService = 10
)

// BenchmarkReconcile reconciles a table of 100,000 UDP flows to 10,000
// UDP services, of which 10,000 are stale: kube-proxy v1.37's
// CleanStaleEntries (the baseline: a dump of the family's whole table, its
// maps, then ConntrackDeleteFilters, which dumps the table again and
// deletes the matches one request each), then ipvsplane's
// reconciliation (the planner's FlowMatcher and conntrack.DeleteFunc, the
// calls of dataplane's ReconcileFlows: one dump the kernel filters by
// family and protocol, deletes many per write). The stale flows are put
// back between iterations, untimed.
func BenchmarkReconcile(b *testing.B) {
	ns := testutil.NewNetNS(b)
	testutil.EnsureConntrackMax(b, ns, 2*services*flowsPerService)
	c, err := conntrack.Dial(&conntrack.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	live, stale := table()
	if err := c.Create(ctx, live...); err != nil {
		b.Fatal(err)
	}
	b.Run("kube-proxy", func(b *testing.B) {
		svcs, eps := kubeProxyMaps()
		ct := kpconntrack.New()
		benchReconcile(b, c, stale, func() {
			if err := ns.Do(func() error {
				kpconntrack.CleanStaleEntries(ct, v1.IPv4Protocol, svcs, eps)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("ipvsplane", func(b *testing.B) {
		p := planner.NewPlanner(nftrules.Render)
		p.Update(&model.State{Node: model.Node{Name: "node-a"}, Services: servicePorts()})
		op := plan.ReconcileFlows{Family: inet.IPv4, Protocol: inet.UDP}
		benchReconcile(b, c, stale, func() {
			m := p.FlowMatcher(op)
			_, err := c.DeleteFunc(ctx, conntrack.Filter{Family: op.Family, Protocol: op.Protocol}, func(f *conntrack.Flow) bool {
				return m.Stale(netip.AddrPortFrom(f.Orig.Dst, f.Orig.DstPort), netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort))
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

// benchReconcile times reconcile, which must delete the stale flows and
// keep the others; the stale flows are put back before each iteration.
func benchReconcile(b *testing.B, c *conntrack.Conn, stale []conntrack.Flow, reconcile func()) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := c.Create(ctx, stale...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		reconcile()
		b.StopTimer()
		n, err := c.Count(ctx, conntrack.All())
		if err != nil || n != services*(flowsPerService-1) {
			b.Fatalf("%d entries left (%v), want %d", n, err, services*(flowsPerService-1))
		}
		b.StartTimer()
	}
}

// Addresses of service i: its cluster IP, its endpoint j (j = 3 is the
// one it no longer has) and its clients.
func clusterIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)})
}
func endpoint(i, j int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(244 + j), byte(i / 250), byte(i%250 + 1)})
}
func client(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 16, byte(i / 250), byte(i%250 + 1)})
}

func nodePort(i int) uint16 {
	if i < nodePorts {
		return uint16(30000 + i)
	}
	return 0
}

// table returns the flows that stay and the stale ones.
func table() (live, stale []conntrack.Flow) {
	for i := range services {
		for k := range flowsPerService {
			ep := k % 3
			if k == flowsPerService-1 {
				ep = 3
			}
			f := conntrack.Flow{
				Orig:    conntrack.Tuple{Src: client(i), Dst: clusterIP(i), Protocol: inet.UDP, SrcPort: uint16(1024 + k), DstPort: 53},
				Reply:   conntrack.Tuple{Src: endpoint(i, ep), Dst: client(i), Protocol: inet.UDP, SrcPort: 5353, DstPort: uint16(1024 + k)},
				Timeout: time.Hour,
			}
			if ep == 3 {
				stale = append(stale, f)
			} else {
				live = append(live, f)
			}
		}
	}
	return live, stale
}

// servicePorts is the table's services as ipvsplane's model.
func servicePorts() []model.ServicePort {
	out := make([]model.ServicePort, services)
	for i := range out {
		sp := model.ServicePort{
			Name:       model.ServicePortName{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
			Protocol:   inet.UDP,
			Port:       53,
			ClusterIPs: []netip.Addr{clusterIP(i)},
			NodePort:   nodePort(i),
		}
		for j := range 3 {
			sp.Endpoints = append(sp.Endpoints, model.Endpoint{Addr: endpoint(i, j), Port: 5353, Ready: true, Serving: true, NodeName: "node-b"})
		}
		out[i] = sp
	}
	return out
}

// kubeProxyMaps is the table's services as kube-proxy's IPv4 proxier
// holds them.
func kubeProxyMaps() (proxy.ServicePortMap, proxy.EndpointsMap) {
	svcs, eps := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	for i := range services {
		name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)}, Protocol: v1.ProtocolUDP}
		svcs[name] = &servicePort{clusterIP: net.IP(clusterIP(i).AsSlice()), nodePort: int(nodePort(i))}
		for j := range 3 {
			eps[name] = append(eps[name], &endpointInfo{ip: endpoint(i, j).String(), port: 5353})
		}
	}
	return svcs, eps
}

// servicePort is a proxy.ServicePort of the table: a UDP ClusterIP or
// NodePort service on port 53.
type servicePort struct {
	clusterIP net.IP
	nodePort  int
}

func (s *servicePort) String() string                          { return fmt.Sprintf("%s:53/UDP", s.clusterIP) }
func (s *servicePort) ClusterIP() net.IP                       { return s.clusterIP }
func (s *servicePort) Port() int                               { return 53 }
func (s *servicePort) SessionAffinityType() v1.ServiceAffinity { return v1.ServiceAffinityNone }
func (s *servicePort) StickyMaxAgeSeconds() int                { return 0 }
func (s *servicePort) ExternalIPs() []net.IP                   { return nil }
func (s *servicePort) LoadBalancerVIPs() []net.IP              { return nil }
func (s *servicePort) Protocol() v1.Protocol                   { return v1.ProtocolUDP }
func (s *servicePort) LoadBalancerSourceRanges() []*net.IPNet  { return nil }
func (s *servicePort) HealthCheckNodePort() int                { return 0 }
func (s *servicePort) NodePort() int                           { return s.nodePort }
func (s *servicePort) ExternalPolicyLocal() bool               { return false }
func (s *servicePort) InternalPolicyLocal() bool               { return false }
func (s *servicePort) ExternallyAccessible() bool              { return s.nodePort != 0 }
func (s *servicePort) UsesClusterEndpoints() bool              { return true }
func (s *servicePort) UsesLocalEndpoints() bool                { return false }

// endpointInfo is a proxy.Endpoint of the table: ready and serving, on
// another node.
type endpointInfo struct {
	ip   string
	port int
}

func (e *endpointInfo) String() string              { return net.JoinHostPort(e.ip, strconv.Itoa(e.port)) }
func (e *endpointInfo) IP() string                  { return e.ip }
func (e *endpointInfo) Port() int                   { return e.port }
func (e *endpointInfo) IsLocal() bool               { return false }
func (e *endpointInfo) IsReady() bool               { return true }
func (e *endpointInfo) IsServing() bool             { return true }
func (e *endpointInfo) IsTerminating() bool         { return false }
func (e *endpointInfo) ZoneHints() sets.Set[string] { return nil }
func (e *endpointInfo) NodeHints() sets.Set[string] { return nil }
