//go:build vmtest

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// vmNode is the node's view in the tests: the guest's own namespace is the
// node; backends and a client live in namespaces behind veth pairs.
//
//	client 192.168.0.2, 172.16.0.2 --- n-c 192.168.0.1, 172.16.0.1 [node] n-b1 10.244.1.1 --- backend-1 10.244.1.2 (on this node)
//	                                                                      n-b2 10.244.2.1 --- backend-2 10.244.2.2 (elsewhere)
type vmNet struct {
	node, client, b1, b2 *testutil.NetNS
}

func setupNet(t *testing.T) *vmNet {
	t.Helper()
	testutil.RequireVM(t)
	n := &vmNet{node: testutil.NewNetNS(t), client: testutil.NewNetNS(t), b1: testutil.NewNetNS(t), b2: testutil.NewNetNS(t)}
	n.node.Link(t, "n-c", n.client, "c0", "192.168.0.1/24", "192.168.0.2/24")
	n.node.IP(t, "addr", "add", "172.16.0.1/24", "dev", "n-c")
	n.client.IP(t, "addr", "add", "172.16.0.2/24", "dev", "c0")
	for i, b := range []*testutil.NetNS{n.b1, n.b2} {
		n.node.Link(t, fmt.Sprintf("n-b%d", i+1), b, "b0", fmt.Sprintf("10.244.%d.1/24", i+1), fmt.Sprintf("10.244.%d.2/24", i+1))
		b.ServeTCP(t, fmt.Sprintf("10.244.%d.2:8080", i+1), fmt.Sprintf("backend-%d", i+1))
	}
	return n
}

func vmNode() model.Node { return fixture.VMNode() }

func webService() model.ServicePort { return fixture.Web() }

func vmServices() []model.ServicePort {
	web := webService()
	sticky := fixture.Svc("default", "sticky", "", inet.TCP, 80, "10.96.0.11")
	sticky.SessionAffinity = time.Hour
	sticky.Endpoints = web.Endpoints
	lb := fixture.Svc("default", "lb", "", inet.TCP, 80, "10.96.0.12")
	lb.NodePort = 30081
	lb.LoadBalancerIPs = fixture.IPs("203.0.113.10")
	lb.LoadBalancerSourceRanges = fixture.Prefixes("192.168.0.0/24")
	lb.Endpoints = web.Endpoints
	local := fixture.Svc("default", "local", "", inet.TCP, 80, "10.96.0.13")
	local.NodePort = 30082
	local.LoadBalancerIPs = fixture.IPs("203.0.113.11")
	local.ExternalPolicy = model.PolicyLocal
	local.HealthCheckNodePort = 32000
	local.Endpoints = web.Endpoints
	return []model.ServicePort{web, sticky, lb, local}
}

func newDataplane(t *testing.T, ns *testutil.NetNS) *Dataplane {
	t.Helper()
	return newDataplaneBinding(t, ns, dummy.BindAddresses)
}

// newDataplaneBinding is newDataplane binding the virtual IPs as b says.
func newDataplaneBinding(t *testing.T, ns *testutil.NetNS, b dummy.Binding) *Dataplane {
	t.Helper()
	return testutil.Open(t, func() (*Dataplane, error) {
		return New(&Config{NetNS: ns.FD(), DrainTimeout: 10 * time.Second, Binding: b})
	})
}

func mustSync(t *testing.T, d *Dataplane, state *model.State) *Result {
	t.Helper()
	res, err := d.Sync(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("sync: %v", e)
	}
	return res
}

// Traffic reaches the services with either binding of their addresses.
func TestDataplaneTraffic(t *testing.T) {
	for _, b := range []dummy.Binding{dummy.BindAddresses, dummy.BindLocalRoutes} {
		t.Run(b.String(), func(t *testing.T) { testTraffic(t, b) })
	}
}

func testTraffic(t *testing.T, binding dummy.Binding) {
	n := setupNet(t)
	d := newDataplaneBinding(t, n.node, binding)
	state := &model.State{Node: vmNode(), Services: vmServices()}
	res := mustSync(t, d, state)
	if !res.Full || res.Plan.Len() == 0 {
		t.Fatalf("the first sync: full=%v, %d operations", res.Full, res.Plan.Len())
	}
	if res := mustSync(t, d, state); res.Plan.Len() != 0 {
		t.Errorf("a second sync of the same state planned:\n%s", res.Plan)
	}

	dial := func(from, to string) (string, error) { return n.client.DialTCP(from, to, 2*time.Second) }
	backendsSeen := func(from, to string, tries int) map[string]string {
		seen := map[string]string{}
		for range tries {
			reply, err := dial(from, to)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			name, peer, _ := strings.Cut(reply, " ")
			host, _, _ := net.SplitHostPort(peer)
			seen[name] = host
		}
		return seen
	}

	t.Run("cluster IP spreads and masquerades", func(t *testing.T) {
		seen := backendsSeen("", "10.96.0.10:80", 4)
		if len(seen) != 2 {
			t.Errorf("round robin reached %v", seen)
		}
		for name, src := range seen {
			if strings.HasPrefix(src, "192.168.") {
				t.Errorf("%s saw the client's own address %s: no masquerade", name, src)
			}
		}
	})
	t.Run("node port", func(t *testing.T) {
		if seen := backendsSeen("", "192.168.0.1:30080", 4); len(seen) != 2 {
			t.Errorf("node port reached %v", seen)
		}
	})
	t.Run("external IP", func(t *testing.T) {
		n.client.IP(t, "route", "add", "198.51.100.10/32", "via", "192.168.0.1")
		if seen := backendsSeen("", "198.51.100.10:80", 2); len(seen) == 0 {
			t.Error("external IP unreachable")
		}
	})
	t.Run("load balancer source ranges", func(t *testing.T) {
		n.client.IP(t, "route", "add", "203.0.113.0/24", "via", "192.168.0.1")
		if _, err := dial("192.168.0.2", "203.0.113.10:80"); err != nil {
			t.Errorf("an allowed source was refused: %v", err)
		}
		if reply, err := dial("172.16.0.2", "203.0.113.10:80"); !testutil.IsTimeout(err) {
			t.Errorf("a source outside the ranges got %q, %v; want the packets dropped", reply, err)
		}
	})
	t.Run("external policy Local keeps the client address", func(t *testing.T) {
		seen := backendsSeen("192.168.0.2", "203.0.113.11:80", 3)
		if len(seen) != 1 || seen["backend-1"] != "192.168.0.2" {
			t.Errorf("want only the local backend-1, seeing 192.168.0.2; got %v", seen)
		}
	})
	t.Run("affinity sticks", func(t *testing.T) {
		if seen := backendsSeen("", "10.96.0.11:80", 4); len(seen) != 1 {
			t.Errorf("a ClientIP service spread over %v", seen)
		}
	})
	t.Run("hairpin", func(t *testing.T) {
		for range 4 {
			reply, err := n.b1.DialTCP("", "10.96.0.10:80", 2*time.Second)
			if err != nil {
				t.Fatalf("backend-1 to its own service: %v", err)
			}
			if strings.HasPrefix(reply, "backend-1 ") {
				return
			}
		}
		t.Error("backend-1 never reached itself through its service")
	})
	t.Run("bound as configured", func(t *testing.T) {
		addrs, routes := deviceAddrs(t, n.node), localRoutes(t, n.node)
		bound, other := addrs, routes
		if binding == dummy.BindLocalRoutes {
			bound, other = routes, addrs
		}
		if !slices.Contains(bound, netip.MustParseAddr("10.96.0.10")) || len(other) != 0 {
			t.Errorf("%s binding: addresses %v, local routes %v", binding, addrs, routes)
		}
	})
	t.Run("an address that is no service's is not local", func(t *testing.T) {
		const none = "10.96.0.99"
		// The node has no default route: "Network is unreachable" is fine.
		if out, _ := n.node.Output(context.Background(), "ip", "route", "get", none); strings.HasPrefix(out, "local") {
			t.Errorf("ip route get %s: %s", none, out)
		}
		// A local address without a virtual server would refuse the
		// connection; one that is not local is unreachable.
		if reply, err := dial("", none+":80"); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s:80 answered %q, %v", none, reply, err)
		}
	})
}

// deviceAddrs returns the IPv4 addresses of the dummy device, as
// iproute2 lists them.
func deviceAddrs(t *testing.T, ns *testutil.NetNS) []netip.Addr {
	t.Helper()
	out, err := ns.Output(context.Background(), "ip", "-4", "-o", "addr", "show", "dev", DefaultDevice)
	if err != nil {
		return nil // no device, no addresses
	}
	var addrs []netip.Addr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "inet"); i >= 0 && i+1 < len(f) {
			addrs = append(addrs, netip.MustParsePrefix(f[i+1]).Addr())
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs
}

// localRoutes returns the destinations of ipvsplane's local routes, as
// iproute2 lists them ("local 10.96.0.10 dev kube-ipvs0 proto 201 scope
// host").
func localRoutes(t *testing.T, ns *testutil.NetNS) []netip.Addr {
	t.Helper()
	out := ns.Run(t, "ip", "-4", "route", "show", "table", "local", "proto", strconv.Itoa(int(dummy.RouteProtocol)))
	var addrs []netip.Addr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "local" || f[2] != "dev" || f[3] != DefaultDevice {
			if len(f) > 0 {
				t.Errorf("ip route shows %q, want a local route through %s", line, DefaultDevice)
			}
			continue
		}
		addrs = append(addrs, netip.MustParseAddr(f[1]))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs
}

// Switching the binding (addresses, then local routes, then addresses
// again) binds the services the new way and leaves none bound the old
// way, and the services answer after each switch.
func TestDataplaneSwitchesBinding(t *testing.T) {
	n := setupNet(t)
	state := &model.State{Node: vmNode(), Services: vmServices()}
	want := slices.SortedFunc(maps.Keys(plan.Build(state, nftrules.Render).Kernel.Addresses), netip.Addr.Compare)
	for i, b := range []dummy.Binding{dummy.BindAddresses, dummy.BindLocalRoutes, dummy.BindAddresses} {
		// A fresh dataplane each time, as a restart with the other
		// option.
		d := newDataplaneBinding(t, n.node, b)
		mustSync(t, d, state)
		addrs, routes := deviceAddrs(t, n.node), localRoutes(t, n.node)
		bound, other := addrs, routes
		if b == dummy.BindLocalRoutes {
			bound, other = routes, addrs
		}
		if !slices.Equal(bound, want) || len(other) != 0 {
			t.Errorf("run %d, %s binding: addresses %v, local routes %v; want %v bound", i, b, addrs, routes, want)
		}
		if res := mustSync(t, d, state); res.Plan.Len() != 0 {
			t.Errorf("run %d: the second sync planned:\n%s", i, res.Plan)
		}
		d.Resync()
		if res := mustSync(t, d, state); res.Plan.Len() != 0 {
			t.Errorf("run %d: a sync after a full read planned:\n%s", i, res.Plan)
		}
		if reply, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
			t.Errorf("run %d: the cluster IP answered %q, %v", i, reply, err)
		}
	}
}

// A removed endpoint drains: its open connection keeps working, new
// connections go elsewhere, and the real server goes once it is closed.
func TestDataplaneDrainsRemovedEndpoint(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node)
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{webService()}}
	mustSync(t, d, state)

	// A long-lived connection to backend-2.
	n.b2.ServeEcho(t, "10.244.2.2:9090")
	long := fixture.Svc("default", "long", "", inet.TCP, 90, "10.96.0.20")
	long.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 9090, "node-a"), fixture.Ready("10.244.2.2", 9090, "node-b")}
	state.Services = append(state.Services, long)
	mustSync(t, d, state)

	var conn *testutil.EchoConn
	for range 2 {
		var err error
		if conn, err = n.client.DialEcho("10.96.0.20:90", 2*time.Second); err == nil {
			break // backend-1 refuses (nothing listens on 9090 there)
		}
	}
	if conn == nil {
		t.Fatal("no connection to backend-2 through the service")
	}
	defer conn.Close()
	echo := func() error { return conn.Echo("ping", 2*time.Second) }
	if err := echo(); err != nil {
		t.Fatal(err)
	}

	state.Services[1].Endpoints = state.Services[1].Endpoints[:1]
	res := mustSync(t, d, state)
	if !strings.Contains(res.Plan.String(), "ipvs edit TCP 10.96.0.20:90 -> 10.244.2.2:9090 weight 0") {
		t.Fatalf("the removed endpoint was not drained:\n%s", res.Plan)
	}
	if err := echo(); err != nil {
		t.Errorf("the open connection broke when its endpoint was drained: %v", err)
	}
	out := n.node.Run(t, "ipvsadm", "-Ln", "-t", "10.96.0.20:90")
	if !strings.Contains(out, "10.244.2.2:9090") {
		t.Errorf("the draining real server is gone too early:\n%s", out)
	}
	conn.Close()
	// IPVS keeps the closed connection as inactive for two minutes
	// (TIME_WAIT); the drain timeout (10s here) ends the wait sooner.
	deadline := time.Now().Add(time.Minute)
	for {
		res := mustSync(t, d, state)
		if strings.Contains(res.Plan.String(), "ipvs del TCP 10.96.0.20:90 -> 10.244.2.2:9090") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the drained real server was never deleted:\n%s", n.node.Run(t, "ipvsadm", "-Ln"))
		}
		time.Sleep(2 * time.Second)
	}
}

// A removed endpoint with no connection, active or inactive, is deleted
// in the same sync, as kube-proxy's GracefulDeleteRS deletes it, rather
// than left at weight 0 for a sync (where `sh` would keep its buckets).
func TestDataplaneDeletesIdleRemovedEndpoint(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node)
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{webService()}}
	mustSync(t, d, state)
	state.Services[0].Endpoints = state.Services[0].Endpoints[:1]
	res := mustSync(t, d, state)
	if plan := res.Plan.String(); !strings.Contains(plan, "ipvs del TCP 10.96.0.10:80 -> 10.244.2.2:8080") || strings.Contains(plan, "weight 0") {
		t.Errorf("the idle removed endpoint was not deleted at once:\n%s", plan)
	}
	if out := n.node.Run(t, "ipvsadm", "-Ln", "-t", "10.96.0.10:80"); strings.Contains(out, "10.244.2.2:8080") {
		t.Errorf("the idle removed endpoint is still there:\n%s", out)
	}
}

// Cross-checks the kernel with the real programs after a sync of many
// service shapes, then removes everything with Cleanup, leaving another
// program's virtual server alone.
func TestDataplaneStateAndCleanup(t *testing.T) {
	n := setupNet(t)
	n.node.Run(t, "ipvsadm", "-A", "-t", "10.96.0.99:80", "-s", "rr")
	d := newDataplane(t, n.node)
	state := &model.State{Node: fixture.Node(), Services: fiftyServices()}
	mustSync(t, d, state)
	desired := plan.Build(state, nftrules.Render)

	listed := map[string]bool{}
	for _, line := range strings.Split(n.node.Run(t, "ipvsadm", "-Ln"), "\n") {
		listed[strings.Join(strings.Fields(line), " ")] = true
	}
	for vk, v := range desired.Kernel.Virtual {
		line := fmt.Sprintf("%s %s %s", strings.ToUpper(vk.Protocol.String()), netip.AddrPortFrom(vk.Addr, vk.Port), v.Scheduler)
		if v.Persistence > 0 {
			line += fmt.Sprintf(" persistent %d", int(v.Persistence.Seconds()))
		}
		if !listed[line] {
			t.Errorf("ipvsadm -Ln lacks %q", line)
		}
	}
	save := n.node.Run(t, "ipset", "save")
	for set, entries := range desired.Kernel.Entries {
		for e := range entries {
			if !strings.Contains(save, fmt.Sprintf("add %s %s\n", set, e)) {
				t.Errorf("ipset save lacks %s %s", set, e)
			}
		}
	}
	node := fixture.Node()
	for family, chains := range renderedChains(nftrules.Render(&node)) {
		listed := nftRuleCounts(n.node.Run(t, "nft", "list", "table", family, nftrules.TableName))
		for name, rules := range chains {
			if got, ok := listed[name]; !ok || got != rules {
				t.Errorf("nft lists %s chain %s with %d rules (present %v), want %d", family, name, got, ok, rules)
			}
		}
		if len(listed) != len(chains) {
			t.Errorf("nft lists %d %s chains, want %d", len(listed), family, len(chains))
		}
	}
	addrs := n.node.Run(t, "ip", "-o", "addr", "show", "dev", DefaultDevice)
	for a := range desired.Kernel.Addresses {
		if !strings.Contains(addrs, " "+a.String()+"/") {
			t.Errorf("ip addr show lacks %s", a)
		}
	}
	// A fresh dataplane (a restart) finds nothing to do but reconcile
	// conntrack.
	d2 := newDataplane(t, n.node)
	if res := mustSync(t, d2, state); len(StateOps(res.Plan)) != 0 {
		t.Errorf("after a restart the first sync planned:\n%s", res.Plan)
	}

	if err := d.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out := n.node.Run(t, "ipvsadm", "-Ln"); !strings.Contains(out, "10.96.0.99:80") || strings.Count(out, "TCP") != 1 {
		t.Errorf("after Cleanup, ipvsadm -Ln:\n%s", out)
	}
	if out := n.node.Run(t, "ipset", "list", "-n"); out != "" {
		t.Errorf("after Cleanup, sets remain:\n%s", out)
	}
	if out := n.node.Run(t, "nft", "list", "tables"); out != "" {
		t.Errorf("after Cleanup, tables remain:\n%s", out)
	}
	if _, err := n.node.Output(context.Background(), "ip", "link", "show", DefaultDevice); err == nil {
		t.Error("after Cleanup the dummy device remains")
	}
}

// fiftyServices returns 50 service ports of every shape, each with its own
// addresses and node port.
func fiftyServices() []model.ServicePort {
	all := fixture.Shapes()
	names := slices.Sorted(maps.Keys(all))
	var out []model.ServicePort
	for i := range 50 {
		s := all[names[i%len(names)]][0]
		s.Name = model.ServicePortName{Namespace: "shapes", Name: fmt.Sprintf("%s-%d", names[i%len(names)], i)}
		s.ClusterIPs = slices.Clone(s.ClusterIPs)
		for j, ip := range s.ClusterIPs {
			if ip.Is4() {
				s.ClusterIPs[j] = netip.AddrFrom4([4]byte{10, 96, 1, byte(i)})
			} else {
				s.ClusterIPs[j] = netip.MustParseAddr(fmt.Sprintf("fd00:96:1::%x", i))
			}
		}
		if len(s.ExternalIPs) > 0 {
			s.ExternalIPs = []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}
		}
		if len(s.LoadBalancerIPs) > 0 {
			s.LoadBalancerIPs = []netip.Addr{netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})}
		}
		if s.NodePort != 0 {
			s.NodePort = uint16(30100 + i)
		}
		if s.HealthCheckNodePort != 0 {
			s.HealthCheckNodePort = uint16(32100 + i)
		}
		out = append(out, s)
	}
	return out
}

// nftRuleCounts reads `nft list table` output: the rules of each chain.
func nftRuleCounts(out string) map[string]int {
	counts := map[string]int{}
	chain := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain ") && strings.HasSuffix(line, "{"):
			chain = strings.Fields(line)[1]
			counts[chain] = 0
		case line == "}":
			chain = ""
		case chain != "" && line != "" && !strings.HasPrefix(line, "type "):
			counts[chain]++
		}
	}
	return counts
}

// When a UDP endpoint leaves, the flows it answered go (IPVS drops its
// connections' entries with the real server, the sync's conntrack
// reconciliation whatever IPVS left), so a client that keeps its source
// port reaches a live endpoint at once; the reconciliation deletes, in
// the kernel's table, a stale flow no change left (one put in with
// Create), and keeps the flows of the endpoint still serving.
func TestDataplaneReconcilesStaleUDPFlows(t *testing.T) {
	n := setupNet(t)
	d := newDataplane(t, n.node)
	n.b1.ServeUDP(t, "10.244.1.2:5353", "backend-1")
	n.b2.ServeUDP(t, "10.244.2.2:5353", "backend-2")
	dns := fixture.Svc("kube-system", "dns", "", inet.UDP, 53, "10.96.0.53")
	dns.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 5353, "node-a"), fixture.Ready("10.244.2.2", 5353, "node-b")}
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{dns}}
	mustSync(t, d, state)

	var conn net.PacketConn
	if err := n.client.Do(func() error {
		var err error
		conn, err = net.ListenPacket("udp", "192.168.0.2:40000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func() string {
		t.Helper()
		vip := &net.UDPAddr{IP: net.ParseIP("10.96.0.53"), Port: 53}
		buf := make([]byte, 64)
		for range 3 {
			conn.WriteTo([]byte("q"), vip)
			conn.SetReadDeadline(time.Now().Add(time.Second))
			if n, _, err := conn.ReadFrom(buf); err == nil {
				name, _, _ := strings.Cut(string(buf[:n]), " ")
				return name
			}
		}
		return ""
	}
	first := ask()
	if first == "" {
		t.Fatal("no answer through the UDP service")
	}
	if again := ask(); again != first {
		t.Fatalf("the flow moved from %s to %s by itself", first, again)
	}
	// Remove the endpoint that answered, with a stale flow in the table.
	keep := dns.Endpoints[1]
	if first == "backend-2" {
		keep = dns.Endpoints[0]
	}
	ct, err := conntrack.Dial(&conntrack.Config{NetNS: n.node.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	stale := conntrack.Flow{
		Orig:    conntrack.Tuple{Src: netip.MustParseAddr("192.168.0.9"), Dst: netip.MustParseAddr("10.96.0.53"), Protocol: inet.UDP, SrcPort: 41000, DstPort: 53},
		Reply:   conntrack.Tuple{Src: netip.MustParseAddr("10.244.9.9"), Dst: netip.MustParseAddr("192.168.0.9"), Protocol: inet.UDP, SrcPort: 5353, DstPort: 41000},
		Timeout: 10 * time.Minute,
	}
	live := stale
	live.Orig.SrcPort, live.Reply.DstPort, live.Reply.Src = 41001, 41001, keep.Addr
	if err := ct.Create(context.Background(), stale, live); err != nil {
		t.Fatal(err)
	}
	state.Services[0].Endpoints = []model.Endpoint{keep}
	res := mustSync(t, d, state)
	if !strings.Contains(res.Plan.String(), "conntrack reconcile udp IPv4") {
		t.Errorf("no conntrack reconciliation planned:\n%s", res.Plan)
	}
	if f := res.Flows; !f.Ran.Get(inet.IPv4) || f.Took.Get(inet.IPv4) <= 0 || f.Deleted.Get(inet.IPv4) < 1 || f.Ran.Get(inet.IPv6) {
		t.Errorf("the sync's flow cleanup tally: %+v, want an IPv4 cleanup only", f)
	}
	t.Logf("flow cleanup: %+v", res.Flows)
	out := n.node.Run(t, "conntrack", "-L", "-p", "udp", "--orig-dst", "10.96.0.53")
	gone := "10.244.1.2"
	if first == "backend-2" {
		gone = "10.244.2.2"
	}
	if strings.Contains(out, "src="+gone) || strings.Contains(out, "src=10.244.9.9") {
		t.Errorf("a flow answered by the removed endpoint %s, or the stale one, is still tracked:\n%s", gone, out)
	}
	if !strings.Contains(out, "sport=41001") {
		t.Errorf("the flow of the endpoint still serving went:\n%s", out)
	}
	if now := ask(); now == "" || now == first {
		t.Errorf("after the endpoint left, the client got %q", now)
	}
}

// Outside flushes of IPVS, the sets, the device and the rules are noticed
// by the next sync's canary and repaired at once; a change the canary
// cannot see (a real server's weight, a virtual server its ownership set
// records but its syncs do not know) is repaired by the sync after the
// periodic reread, which runs in the background.
func TestDataplaneRepairsDrift(t *testing.T) {
	n := setupNet(t)
	now := time.Now()
	read := make(chan struct{}, 1)
	d, err := New(&Config{NetNS: n.node.FD(), ResyncInterval: time.Minute, Now: func() time.Time { return now },
		KernelRead: func() { read <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	state := &model.State{Node: vmNode(), Services: vmServices()}
	mustSync(t, d, state)
	for _, flush := range [][]string{
		{"ipvsadm", "-C"},
		{"ipset", "flush"},
		{"ip", "link", "del", DefaultDevice},
		{"nft", "flush", "ruleset"},
	} {
		n.node.Run(t, flush[0], flush[1:]...)
		now = now.Add(canaryEvery) // the canary looks at most this often
		if res := mustSync(t, d, state); !res.Full || res.Plan.Len() == 0 {
			t.Errorf("after %v the next sync was full=%v with %d operations", flush, res.Full, res.Plan.Len())
		}
		if res := mustSync(t, d, state); res.Plan.Len() != 0 || res.Full {
			t.Errorf("after repairing %v a sync still planned (full=%v):\n%s", flush, res.Full, res.Plan)
		}
		if reply, err := n.client.DialTCP("", "10.96.0.10:80", 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
			t.Errorf("after repairing %v the service answers %q, %v", flush, reply, err)
		}
	}
	n.node.Run(t, "ipvsadm", "-e", "-t", "10.96.0.10:80", "-r", "10.244.1.2:8080", "-m", "-w", "7")
	// As a run whose delete failed before it stopped leaves one.
	n.node.Run(t, "ipvsadm", "-A", "-t", "10.96.0.99:80", "-s", "rr")
	n.node.Run(t, "ipset", "add", model.SetName(model.SetOwned, inet.IPv4), "10.96.0.99,tcp:80")
	now = now.Add(canaryEvery)
	if res := mustSync(t, d, state); res.Full {
		t.Fatal("the canary saw a weight change")
	}
	now = now.Add(time.Minute)
	if res := mustSync(t, d, state); res.Full {
		t.Error("the sync that started the periodic reread waited for it")
	}
	<-read
	res := mustSync(t, d, state)
	for _, want := range []string{"ipvs edit TCP 10.96.0.10:80 -> 10.244.1.2:8080 weight 1", "ipvs del TCP 10.96.0.99:80"} {
		if !res.Full || !strings.Contains(res.Plan.String(), want) {
			t.Errorf("the sync after the periodic reread did not plan %q (full=%v):\n%s", want, res.Full, res.Plan)
		}
	}
	if out := n.node.Run(t, "ipvsadm", "-Ln"); strings.Contains(out, "10.96.0.99") {
		t.Errorf("the stale virtual server is still there:\n%s", out)
	}
}

// Virtual servers of other programs, made before ipvsplane starts or while
// it runs, survive syncs, resyncs and cleanup; the node's sysctls are set.
func TestDataplaneLeavesOthersAlone(t *testing.T) {
	n := setupNet(t)
	n.node.Run(t, "ipvsadm", "-A", "-t", "10.96.1.1:80", "-s", "rr")
	d := newDataplane(t, n.node)
	state := &model.State{Node: vmNode(), Services: []model.ServicePort{webService()}}
	mustSync(t, d, state)
	n.node.Run(t, "ipvsadm", "-A", "-u", "10.96.1.2:53", "-s", "wrr")
	n.node.Run(t, "ipvsadm", "-a", "-u", "10.96.1.2:53", "-r", "10.244.1.2:53", "-m")
	d.Resync()
	mustSync(t, d, state)
	state.Services = nil
	mustSync(t, d, state)
	d.Resync()
	mustSync(t, d, state)
	if err := d.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := n.node.Run(t, "ipvsadm", "-Ln")
	for _, want := range []string{"TCP  10.96.1.1:80 rr", "UDP  10.96.1.2:53 wrr", "10.244.1.2:53"} {
		if !strings.Contains(out, want) {
			t.Errorf("another program's %q is gone:\n%s", want, out)
		}
	}
	if strings.Contains(out, "10.96.0.10") {
		t.Errorf("ipvsplane's own virtual server survived cleanup:\n%s", out)
	}
	node := vmNode()
	for _, s := range node.Sysctls() {
		got := strings.TrimSpace(n.node.Run(t, "cat", "/proc/sys/"+s.Name))
		if got != fmt.Sprint(s.Value) {
			t.Errorf("%s = %s, want %d", s.Name, got, s.Value)
		}
	}
}

// The periodic reread runs beside the syncs: changes that arrive while
// the kernel is read are programmed at once, and the syncs after the
// read merge it, a piece each, without undoing them or repeating them.
func TestDataplaneSyncsDuringReread(t *testing.T) {
	ns := testutil.NewNetNS(t)
	now := time.Now()
	read := make(chan struct{}, 1)
	d, err := New(&Config{NetNS: ns.FD(), ResyncInterval: time.Minute, Now: func() time.Time { return now },
		KernelRead: func() { read <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 2000
	state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(n, 10)}
	mustSync(t, d, state)

	now = now.Add(time.Minute)
	readStart := time.Now()
	extra := model.Endpoint{Addr: netip.MustParseAddr("10.200.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "node-z"}
	var during []time.Duration
	merged := false
	for i := 0; ; i++ {
		target := &state.Services[(i/2*37)%n]
		if i%2 == 0 {
			target.Endpoints = append(target.Endpoints, extra)
		} else {
			target.Endpoints = target.Endpoints[:10]
		}
		start := time.Now()
		res, err := d.SyncChanges(context.Background(), []model.Change{{Name: target.Name, Port: target}})
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("change %d: %v %v", i, err, res.Errors)
		}
		if res.Full || res.Sweeping {
			// Only a read that had ended may be merged by a change's
			// sync; one still running must not hold the change back.
			// The reader closes its done channel before it notifies, so
			// the notice may trail the merge by a moment.
			select {
			case <-read:
				merged = true
			case <-time.After(10 * time.Second):
				t.Fatalf("change %d waited for the reread", i)
			}
		}
		if kernelOps(res.Plan) == 0 {
			t.Fatalf("change %d was not programmed:\n%s", i, res.Plan)
		}
		during = append(during, time.Since(start))
		if merged {
			break
		}
		if i%2 == 1 {
			// The next change deletes the drained real server; the read
			// is merged after an addition, so that the merge has nothing
			// left to do.
			continue
		}
		select {
		case <-read:
		default:
			continue
		}
		break
	}
	readTook := time.Since(readStart)
	if len(during) < 2 {
		t.Fatalf("the reread (%v) ended before a change could be synced beside it", readTook)
	}
	t.Logf("reread of %d services took %v; %d changes synced meanwhile, the slowest in %v (merged by a change's sync: %v)", n, readTook, len(during), slices.Max(during), merged)
	if merged {
		// The read ended between two changes and the second merged it.
		return
	}
	var planned []string
	for syncs := 0; ; syncs++ {
		res := mustSync(t, d, state)
		if res.Plan.Len() != 0 {
			planned = append(planned, res.Plan.String())
		}
		if res.Full {
			break
		}
		if !res.Sweeping || syncs > 1000 {
			t.Fatalf("sync %d after the reread neither compared everything nor went on comparing it", syncs)
		}
	}
	if len(planned) > 0 {
		t.Errorf("merging the reread planned operations:\n%s", strings.Join(planned, ""))
	}
}

// renderedChains counts the rules of each chain of the printed tables, per
// family ("ip", "ip6").
func renderedChains(rendered string) map[string]map[string]int {
	out := map[string]map[string]int{}
	var family, chain string
	for _, line := range strings.Split(rendered, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "table":
			family = f[1]
			out[family] = map[string]int{}
		case len(f) == 3 && f[0] == "chain":
			chain = f[1]
			out[family][chain] = 0
		case strings.HasPrefix(line, "    ") && f[0] != "type":
			out[family][chain]++
		}
	}
	return out
}

// A handover gives kube-proxy the virtual IPs as addresses, which it
// adopts and later removes; a local route it would never remove.
func TestDataplaneHandoverTurnsRoutesIntoAddresses(t *testing.T) {
	n := setupNet(t)
	state := &model.State{Node: vmNode(), Services: vmServices()}
	want := slices.SortedFunc(maps.Keys(plan.Build(state, nftrules.Render).Kernel.Addresses), netip.Addr.Compare)
	d := newDataplaneBinding(t, n.node, dummy.BindLocalRoutes)
	mustSync(t, d, state)
	if err := d.Handover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if addrs, routes := deviceAddrs(t, n.node), localRoutes(t, n.node); !slices.Equal(addrs, want) || len(routes) != 0 {
		t.Errorf("after the handover: addresses %v, local routes %v; want addresses %v", addrs, routes, want)
	}
}

// The canary trusts the rules while the ruleset generation stays: it must
// stay while nothing changes and move when anything in nftables does.
func TestRulesetGeneration(t *testing.T) {
	ns := testutil.NewNetNS(t)
	d := newDataplane(t, ns)
	ctx := context.Background()
	gen := func() uint32 {
		t.Helper()
		g, err := d.k.gen.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := gen()
	if again := gen(); again != first {
		t.Errorf("the generation moved from %d to %d with no change", first, again)
	}
	ns.Run(t, "nft", "add", "table", "ip", "someone-else")
	if after := gen(); after == first {
		t.Errorf("the generation stayed at %d after a table was added", after)
	}
}

// A set that fills is grown in place on a real kernel too: the larger
// set takes its name, and every entry is in it.
func TestDataplaneGrowsFullSet(t *testing.T) {
	n := setupNet(t)
	n.node.Run(t, "ipset", "create", "KUBE-CLUSTER-IP", "hash:ip,port", "maxelem", "4")
	d := newDataplane(t, n.node)
	state := &model.State{Node: vmNode()}
	state.Services = fixture.Numbered(1, 4)
	mustSync(t, d, state)
	state.Services = append(state.Services, fixture.Numbered(4, 10)...)
	mustSync(t, d, state)
	out := n.node.Run(t, "ipset", "list", "KUBE-CLUSTER-IP")
	if !strings.Contains(out, "maxelem 65536") || !strings.Contains(out, "Number of entries: 9") {
		t.Errorf("the full set was not grown with every entry:\n%s", out)
	}
	if res := mustSync(t, d, state); res.Plan.Len() != 0 {
		t.Errorf("a sync after the growth planned:\n%s", res.Plan)
	}
	if reply, err := n.client.DialTCP("", "10.96.1.9:80", 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-") {
		t.Errorf("a service whose entry needed the growth answers %q, %v", reply, err)
	}
}
