package traffic

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fakeLister is a kernel's virtual servers; it counts its dumps.
type fakeLister struct {
	mu    sync.Mutex
	svcs  []ipvs.Service
	dumps int
}

func (f *fakeLister) Services(context.Context) ([]ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dumps++
	return f.svcs, nil
}

func (f *fakeLister) dumped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dumps
}

func kernelService(proto inet.Protocol, addr string, port uint16, s ipvs.Stats) ipvs.Service {
	a := netip.MustParseAddr(addr)
	f := inet.IPv4
	if a.Is6() {
		f = inet.IPv6
	}
	return ipvs.Service{Family: f, Protocol: proto, Addr: a, Port: port, Scheduler: "rr", Stats: s}
}

func trafficNode() *model.Node {
	return &model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10"), netip.MustParseAddr("fd00:1::10")}}
}

// webPort has a virtual server of every kind, in both families: cluster
// IPs, node ports, an external and a load-balancer address.
func webPort() model.ServicePort {
	return model.ServicePort{
		Name: model.ServicePortName{Namespace: "shop", Name: "web", Port: "http"}, Protocol: inet.TCP, Port: 80,
		ClusterIPs:  []netip.Addr{netip.MustParseAddr("10.96.0.20"), netip.MustParseAddr("fd00:96::20")},
		NodePort:    30080,
		ExternalIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}, LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("2001:db8::10")},
	}
}

func dnsPort() model.ServicePort {
	return model.ServicePort{
		Name: model.ServicePortName{Namespace: "kube-system", Name: "kube-dns", Port: "dns"}, Protocol: inet.UDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
	}
}

func stats(conns, pktIn, pktOut, bytesIn, bytesOut uint64) ipvs.Stats {
	return ipvs.Stats{Connections: conns, PacketsIn: pktIn, PacketsOut: pktOut, BytesIn: bytesIn, BytesOut: bytesOut, CPS: 99}
}

// trafficNames are the collector's metrics.
var trafficNames = []string{"ipvsplane_service_connections_total", "ipvsplane_service_packets_total", "ipvsplane_service_bytes_total"}

// exposition is the text format of the three metrics with the given
// samples, in the order the format sorts them.
func exposition(connections, packets, bytes string) string {
	return `# HELP ipvsplane_service_bytes_total Bytes through the service port's virtual servers; in is from clients, out is replies.
# TYPE ipvsplane_service_bytes_total counter
` + bytes + `# HELP ipvsplane_service_connections_total Connections IPVS scheduled to the service port's virtual servers (all its addresses and node ports).
# TYPE ipvsplane_service_connections_total counter
` + connections + `# HELP ipvsplane_service_packets_total Packets through the service port's virtual servers; in is from clients, out is replies.
# TYPE ipvsplane_service_packets_total counter
` + packets
}

// planned is the planner's answers (Planned) for some service ports:
// each claims what plan.VirtualKeys lists for it, and a virtual server
// several claim is the last one's.
type planned struct {
	claims map[model.ServicePortName][]plan.VirtualKey
	owners map[plan.VirtualKey]model.ServicePortName
}

// plannedOf is the planner's choice where ports claim no virtual server in
// common: each is its claimant's.
func plannedOf(node *model.Node, ports ...model.ServicePort) planned {
	p := planned{claims: map[model.ServicePortName][]plan.VirtualKey{}, owners: map[plan.VirtualKey]model.ServicePortName{}}
	for i := range ports {
		keys := plan.VirtualKeys(node, &ports[i])
		p.claims[ports[i].Name] = keys
		for _, k := range keys {
			p.owners[k] = ports[i].Name
		}
	}
	return p
}

func (p planned) Claims(name model.ServicePortName) []plan.VirtualKey { return p.claims[name] }

func (p planned) Owner(k plan.VirtualKey) (model.ServicePortName, bool) {
	name, ok := p.owners[k]
	return name, ok
}

// A service port's series sum all its virtual servers, both families and
// every kind; virtual servers of no service port are left out.
func TestServiceTrafficSumsVirtualServers(t *testing.T) {
	web, dns := webPort(), dnsPort()
	k := &fakeLister{svcs: []ipvs.Service{
		kernelService(inet.TCP, "10.96.0.20", 80, stats(1, 10, 20, 1000, 2000)),
		kernelService(inet.TCP, "fd00:96::20", 80, stats(2, 10, 20, 1000, 2000)),
		kernelService(inet.TCP, "203.0.113.5", 80, stats(3, 10, 20, 1000, 2000)),
		kernelService(inet.TCP, "2001:db8::10", 80, stats(4, 10, 20, 1000, 2000)),
		kernelService(inet.TCP, "192.168.0.10", 30080, stats(5, 10, 20, 1000, 2000)),
		kernelService(inet.TCP, "fd00:1::10", 30080, stats(6, 10, 20, 1000, 2000)),
		kernelService(inet.UDP, "10.96.0.10", 53, stats(7, 7, 7, 700, 1400)),
		// Another program's, and the same address under another protocol.
		kernelService(inet.TCP, "192.0.2.1", 80, stats(100, 100, 100, 100, 100)),
		kernelService(inet.UDP, "10.96.0.20", 80, stats(100, 100, 100, 100, 100)),
		{Family: inet.IPv4, FirewallMark: 7, Scheduler: "rr", Stats: stats(100, 100, 100, 100, 100)},
	}}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tr := New(k, clock.now)
	tr.Replace([]model.ServicePort{web, dns}, plannedOf(trafficNode(), web, dns))
	if err := tr.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := exposition(
		`ipvsplane_service_connections_total{name="kube-dns",namespace="kube-system",port="dns",protocol="udp"} 7
ipvsplane_service_connections_total{name="web",namespace="shop",port="http",protocol="tcp"} 21
`, `ipvsplane_service_packets_total{direction="in",name="kube-dns",namespace="kube-system",port="dns",protocol="udp"} 7
ipvsplane_service_packets_total{direction="in",name="web",namespace="shop",port="http",protocol="tcp"} 60
ipvsplane_service_packets_total{direction="out",name="kube-dns",namespace="kube-system",port="dns",protocol="udp"} 7
ipvsplane_service_packets_total{direction="out",name="web",namespace="shop",port="http",protocol="tcp"} 120
`, `ipvsplane_service_bytes_total{direction="in",name="kube-dns",namespace="kube-system",port="dns",protocol="udp"} 700
ipvsplane_service_bytes_total{direction="in",name="web",namespace="shop",port="http",protocol="tcp"} 6000
ipvsplane_service_bytes_total{direction="out",name="kube-dns",namespace="kube-system",port="dns",protocol="udp"} 1400
ipvsplane_service_bytes_total{direction="out",name="web",namespace="shop",port="http",protocol="tcp"} 12000
`)
	if err := testutil.CollectAndCompare(tr, strings.NewReader(want), trafficNames...); err != nil {
		t.Error(err)
	}
}

// Scrapes are served from the last reading: the kernel is dumped once a
// tick, however many scrapes come in between, and not at all before the
// first tick, when there are no series.
func TestServiceTrafficOneDumpPerInterval(t *testing.T) {
	web := webPort()
	k := &fakeLister{svcs: []ipvs.Service{kernelService(inet.TCP, "10.96.0.20", 80, stats(1, 1, 1, 1, 1))}}
	tr := New(k, time.Now)
	tr.Replace([]model.ServicePort{web}, plannedOf(trafficNode(), web))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr)
	if n, err := testutil.GatherAndCount(reg, trafficNames...); err != nil || n != 0 {
		t.Fatalf("before the first reading: %d series, %v", n, err)
	}
	ticks := make(chan time.Time)
	read := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.run(ctx, ticks, func(err error) { read <- err })
	}()
	for tick := 1; tick <= 3; tick++ {
		ticks <- time.Now()
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if n, err := testutil.GatherAndCount(reg, trafficNames...); err != nil || n != 5 {
				t.Fatalf("%d series, %v; want 5 (connections, packets and bytes in and out)", n, err)
			}
		}
		if got := k.dumped(); got != tick {
			t.Fatalf("%d dumps after %d ticks and %d scrapes", got, tick, 5*tick)
		}
	}
	cancel()
	<-done
}

// Rates come from the last two readings, over the time between them; a
// port not in both has none yet, and idle ports are left out. The
// busiest by bytes come first.
func TestServiceTrafficRates(t *testing.T) {
	web, dns := webPort(), dnsPort()
	k := &fakeLister{svcs: []ipvs.Service{
		kernelService(inet.TCP, "10.96.0.20", 80, stats(10, 100, 100, 1000, 1000)),
		kernelService(inet.TCP, "192.168.0.10", 30080, stats(10, 100, 100, 1000, 1000)),
		kernelService(inet.UDP, "10.96.0.10", 53, stats(5, 5, 5, 500, 500)),
	}}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tr := New(k, clock.now)
	tr.Replace([]model.ServicePort{web, dns}, plannedOf(trafficNode(), web, dns))
	ctx := context.Background()
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if r := tr.rates(); len(r.Ports) != 0 || !r.At.Equal(clock.t) {
		t.Fatalf("one reading gave rates: %+v", r)
	}
	// Ten seconds on: web counted 20 connections (10 on each of two
	// virtual servers), dns nothing; a new port appears.
	clock.advance(10 * time.Second)
	api := model.ServicePort{Name: model.ServicePortName{Namespace: "default", Name: "api"}, Protocol: inet.TCP, Port: 443,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}
	tr.Apply([]model.Change{{Name: api.Name, Port: &api}}, plannedOf(trafficNode(), web, dns, api))
	k.svcs = []ipvs.Service{
		kernelService(inet.TCP, "10.96.0.20", 80, stats(20, 200, 150, 3000, 2000)),
		kernelService(inet.TCP, "192.168.0.10", 30080, stats(20, 200, 150, 3000, 2000)),
		kernelService(inet.UDP, "10.96.0.10", 53, stats(5, 5, 5, 500, 500)),
		kernelService(inet.TCP, "10.96.0.1", 443, stats(1000, 1000, 1000, 1e6, 1e6)),
	}
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r := tr.rates()
	want := []status.PortRate{{Service: "shop/web:http", Protocol: "tcp", ConnectionsPS: 2, PacketsInPS: 20, PacketsOutPS: 10, BytesInPS: 400, BytesOutPS: 200}}
	if r.Seconds != 10 || len(r.Ports) != 1 || r.Ports[0] != want[0] {
		t.Errorf("got %+v, want over 10s %+v", r, want)
	}
	// At the third reading the new port has a rate, and it leads.
	clock.advance(5 * time.Second)
	k.svcs[3].Stats = stats(1500, 1500, 1500, 2e6, 2e6)
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r = tr.rates()
	if len(r.Ports) != 1 || r.Ports[0].Service != "default/api" || r.Ports[0].BytesInPS != 2e5 || r.Seconds != 5 {
		t.Errorf("got %+v", r)
	}
}

// A virtual server made afresh (its counters back to zero) adds what it
// counted since, so the port's counters never go back; a virtual server
// the port gives up and takes back counts from zero.
func TestServiceTrafficVirtualServerRecreated(t *testing.T) {
	web := webPort()
	web.NodePort, web.ExternalIPs, web.LoadBalancerIPs = 0, nil, nil
	k := &fakeLister{svcs: []ipvs.Service{kernelService(inet.TCP, "10.96.0.20", 80, stats(100, 100, 100, 100, 100))}}
	tr := New(k, time.Now)
	tr.Replace([]model.ServicePort{web}, plannedOf(trafficNode(), web))
	ctx := context.Background()
	total := func() trafficCounters {
		t.Helper()
		if err := tr.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		return tr.ports[web.Name].total
	}
	if got := total(); got.Connections != 100 {
		t.Fatalf("first reading: %+v", got)
	}
	k.svcs[0].Stats = stats(30, 30, 30, 30, 30) // created again
	if got := total(); got.Connections != 130 || got.BytesOut != 130 {
		t.Errorf("after the reset: %+v, want 130 each", got)
	}
	k.svcs[0].Stats = stats(40, 40, 40, 40, 40)
	if got := total(); got.Connections != 140 {
		t.Errorf("after 10 more: %+v", got)
	}
	// The cluster IP goes, and comes back with a new virtual server that
	// counted more than the old one's last reading.
	moved := web
	moved.ClusterIPs = []netip.Addr{netip.MustParseAddr("fd00:96::20")}
	tr.Apply([]model.Change{{Name: web.Name, Port: &moved}}, plannedOf(trafficNode(), moved))
	tr.Apply([]model.Change{{Name: web.Name, Port: &web}}, plannedOf(trafficNode(), web))
	k.svcs[0].Stats = stats(50, 50, 50, 50, 50)
	if got := total(); got.Connections != 190 {
		t.Errorf("after the virtual server came back with 50: %+v, want 190", got)
	}
}

// A port's series go with it, and a port that changes protocol is
// another series, starting from zero.
func TestServiceTrafficSeriesFollowPorts(t *testing.T) {
	web, dns := webPort(), dnsPort()
	web.NodePort, web.ExternalIPs, web.LoadBalancerIPs = 0, nil, nil
	k := &fakeLister{svcs: []ipvs.Service{
		kernelService(inet.TCP, "10.96.0.20", 80, stats(4, 4, 4, 4, 4)),
		kernelService(inet.UDP, "10.96.0.10", 53, stats(2, 2, 2, 2, 2)),
	}}
	tr := New(k, time.Now)
	tr.Replace([]model.ServicePort{web, dns}, plannedOf(trafficNode(), web, dns))
	ctx := context.Background()
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	udpWeb := web
	udpWeb.Protocol = inet.UDP
	tr.Apply([]model.Change{{Name: dns.Name}, {Name: web.Name, Port: &udpWeb}}, plannedOf(trafficNode(), udpWeb))
	k.svcs = []ipvs.Service{kernelService(inet.UDP, "10.96.0.20", 80, stats(1, 1, 1, 1, 1))}
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := exposition(`ipvsplane_service_connections_total{name="web",namespace="shop",port="http",protocol="udp"} 1
`, `ipvsplane_service_packets_total{direction="in",name="web",namespace="shop",port="http",protocol="udp"} 1
ipvsplane_service_packets_total{direction="out",name="web",namespace="shop",port="http",protocol="udp"} 1
`, `ipvsplane_service_bytes_total{direction="in",name="web",namespace="shop",port="http",protocol="udp"} 1
ipvsplane_service_bytes_total{direction="out",name="web",namespace="shop",port="http",protocol="udp"} 1
`)
	if err := testutil.CollectAndCompare(tr, strings.NewReader(want), trafficNames...); err != nil {
		t.Error(err)
	}
}

// After each reading the daemon writes the rates beside the state file;
// status shows the busiest ports by bytes per second, --top of them.
func TestStatusShowsTrafficRates(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "run", "status.json")
	web, dns := webPort(), dnsPort()
	k := &fakeLister{svcs: []ipvs.Service{
		kernelService(inet.TCP, "10.96.0.20", 80, stats(0, 0, 0, 0, 0)),
		kernelService(inet.UDP, "10.96.0.10", 53, stats(0, 0, 0, 0, 0)),
	}}
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	tr := New(k, clock.now)
	tr.Replace([]model.ServicePort{web, dns}, plannedOf(trafficNode(), web, dns))
	var out strings.Builder
	show := func(top int) string {
		t.Helper()
		if err := tr.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		tr.report(zap.NewNop(), stateFile, nil)
		r, err := status.ReadTraffic(stateFile)
		out.Reset()
		if err := status.PrintTraffic(&out, r, err, top, clock.t.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if got := show(1); !strings.Contains(got, "one reading so far (3s ago)") {
		t.Errorf("after one reading:\n%s", got)
	}
	clock.advance(10 * time.Second)
	k.svcs[0].Stats = stats(10, 20, 30, 4000, 50000)
	k.svcs[1].Stats = stats(100, 100, 100, 6000, 12000)
	got := show(1)
	fields := strings.Join(strings.Fields(got), " ")
	for _, want := range []string{"over the 10s", "SERVICE PROTOCOL CONN/S PKT/S IN PKT/S OUT BYTES/S IN BYTES/S OUT shop/web:http tcp 1.0 2.0 3.0 400 5000 (1 more service ports had traffic; --top 0 shows all)"} {
		if !strings.Contains(fields, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	clock.advance(10 * time.Second)
	k.svcs[0].Stats = stats(20, 40, 60, 8000, 100000)
	k.svcs[1].Stats = stats(200, 200, 200, 12000, 24000)
	if got := show(0); !strings.Contains(got, "kube-system/kube-dns:dns") || strings.Contains(got, "more service ports") {
		t.Errorf("--top 0:\n%s", got)
	}
	// Without the metrics there is no file, and nothing is shown.
	out.Reset()
	_, err := status.ReadTraffic(filepath.Join(t.TempDir(), "status.json"))
	if err := status.PrintTraffic(&out, nil, err, 20, clock.t); err != nil || out.Len() != 0 {
		t.Errorf("without the file: %v %q", err, out.String())
	}
}

// A virtual server two ports claim (a tenant's external IP on another
// Service's cluster IP) counts for the port the planner programs it for,
// whichever came last; when the owner goes, it passes to the other,
// which is credited from then on only.
func TestServiceTrafficContestedVirtualServer(t *testing.T) {
	dns := dnsPort()
	squat := model.ServicePort{Name: model.ServicePortName{Namespace: "tenant", Name: "squat", Port: "dns"}, Protocol: inet.UDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.99")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	k := &fakeLister{svcs: []ipvs.Service{kernelService(inet.UDP, "10.96.0.10", 53, stats(10, 10, 10, 10, 10))}}
	tr := New(k, time.Now)
	ctx := context.Background()
	totals := func() (dns, squat uint64) {
		t.Helper()
		if err := tr.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range tr.ports {
			if p.name.Name == "kube-dns" {
				dns = p.total.Connections
			} else {
				squat = p.total.Connections
			}
		}
		return dns, squat
	}
	// The planner gives it to the cluster IP; the tenant's port comes
	// last, in the whole state and as a change.
	dnsOwns := plannedOf(trafficNode(), squat, dns)
	tr.Replace([]model.ServicePort{dns, squat}, dnsOwns)
	if d, s := totals(); d != 10 || s != 0 {
		t.Errorf("after the whole state: kube-dns %d, squat %d; want 10, 0", d, s)
	}
	tr.Apply([]model.Change{{Name: squat.Name, Port: &squat}}, dnsOwns)
	k.svcs[0].Stats = stats(15, 15, 15, 15, 15)
	if d, s := totals(); d != 15 || s != 0 {
		t.Errorf("after the tenant's change: kube-dns %d, squat %d; want 15, 0", d, s)
	}
	tr.Apply([]model.Change{{Name: dns.Name}}, plannedOf(trafficNode(), squat))
	k.svcs[0].Stats = stats(17, 17, 17, 17, 17)
	if _, s := totals(); s != 2 {
		t.Errorf("once kube-dns went: squat %d, want the 2 since", s)
	}
}
