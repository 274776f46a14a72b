//go:build vmtest

package ipvs

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// Real traffic once: a VIP on a dummy device in the balancer's namespace,
// two backends in namespaces of their own behind veth, and a client in a
// third. Round robin spreads connections over both backends; persistence
// makes them stick to one; the counters agree with ipvsadm's.
func TestTraffic(t *testing.T) {
	e := setup(t)
	c := testutil.Context(t)
	vip := netip.MustParseAddr("10.96.0.100")

	e.ns.IP(t, "link", "add", "vip0", "up", "type", "dummy")
	e.ns.IP(t, "addr", "add", netip.PrefixFrom(vip, 32).String(), "dev", "vip0")

	client := testutil.NewNetNS(t)
	link(t, e.ns, client, "cl", 3)
	var backends []Destination
	for i := 1; i <= 2; i++ {
		ns := testutil.NewNetNS(t)
		link(t, e.ns, ns, fmt.Sprintf("b%d", i), i)
		ns.ServeTCP(t, fmt.Sprintf("10.0.%d.2:8080", i), fmt.Sprintf("backend-%d", i))
		backends = append(backends, Destination{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i), 2}), Port: 8080, Weight: 1})
	}
	if err := e.ns.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644) }); err != nil {
		t.Fatal(err)
	}

	svc := Service{Protocol: inet.TCP, Addr: vip, Port: 80, Scheduler: "rr"}
	var b Batch
	b.CreateService(svc)
	for _, d := range backends {
		b.CreateDestination(svc, d)
	}
	if err := e.c.Apply(c, &b); err != nil {
		t.Fatal(err)
	}

	hits := connect(t, client, vip, 20)
	if hits["backend-1"] != 10 || hits["backend-2"] != 10 {
		t.Fatalf("round robin: %v", hits)
	}

	svc.Flags, svc.Timeout = Persistent, time.Minute
	if err := e.c.UpdateService(c, svc); err != nil {
		t.Fatal(err)
	}
	if hits := connect(t, client, vip, 10); len(hits) != 1 {
		t.Fatalf("persistence: %v", hits)
	}

	// The counters, read by this package and by ipvsadm. The kernel
	// publishes them every two seconds, from its rate estimator.
	var table []VirtualServer
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if table, err = e.c.Table(c); err != nil {
			t.Fatal(err)
		}
		if table[0].Service.Stats.Connections == 30 || time.Now().After(deadline) {
			break
		}
	}
	got := table[0].Service.Stats
	if got.Connections != 30 || got.PacketsIn == 0 || got.BytesOut == 0 {
		t.Fatalf("service counters: %+v", got)
	}
	// Traffic has stopped; let one more estimator round pass so both
	// readers see the same numbers.
	time.Sleep(2500 * time.Millisecond)
	table, err := e.c.Table(c)
	if err != nil {
		t.Fatal(err)
	}
	got = table[0].Service.Stats
	var conns, inPkts, outPkts, inBytes, outBytes uint64
	out := e.ns.Run(t, "ipvsadm", "-Ln", "--exact", "--stats")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "TCP ") {
			var proto, addr string
			if _, err := fmt.Sscan(line, &proto, &addr, &conns, &inPkts, &outPkts, &inBytes, &outBytes); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
	}
	if want := (Stats{Connections: conns, PacketsIn: inPkts, PacketsOut: outPkts, BytesIn: inBytes, BytesOut: outBytes}); got.Connections != want.Connections ||
		got.PacketsIn != want.PacketsIn || got.PacketsOut != want.PacketsOut || got.BytesIn != want.BytesIn || got.BytesOut != want.BytesOut {
		t.Fatalf("counters: ours %+v, ipvsadm %+v", got, want)
	}
	var perBackend uint64
	for _, d := range table[0].Destinations {
		perBackend += d.Stats.Connections
	}
	if perBackend != 30 {
		t.Fatalf("destination counters add up to %d connections", perBackend)
	}
}

// link joins the balancer to peer with a veth pair on 10.0.n.0/24: the
// balancer is .1, the peer .2 with its default route through the
// balancer, so replies come back through IPVS.
func link(t *testing.T, lb, peer *testutil.NetNS, name string, n int) {
	t.Helper()
	lb.Link(t, name, peer, "eth0", fmt.Sprintf("10.0.%d.1/24", n), fmt.Sprintf("10.0.%d.2/24", n))
}

// connect opens n connections from ns to vip:80 one after another and
// counts the answers by backend.
func connect(t *testing.T, ns *testutil.NetNS, vip netip.Addr, n int) map[string]int {
	t.Helper()
	hits := map[string]int{}
	for range n {
		answer, err := ns.DialTCP("", netip.AddrPortFrom(vip, 80).String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(answer, " ")
		hits[name]++
	}
	return hits
}
