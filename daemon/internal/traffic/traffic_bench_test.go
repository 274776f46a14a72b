package traffic

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/prometheus/client_golang/prometheus"
)

// benchTrafficPorts is the size the traffic metrics are measured at.
const benchTrafficPorts = 10000

// benchTraffic is 10,000 dual-stack NodePort service ports (4 virtual
// servers each: two cluster IPs, the node port on the node's two
// addresses), and the kernel's dump of their 40,000 virtual servers.
func benchTraffic() (*model.Node, []model.ServicePort, []ipvs.Service) {
	node := trafficNode()
	ports := make([]model.ServicePort, benchTrafficPorts)
	var svcs []ipvs.Service
	for i := range ports {
		v4 := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		v6 := netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x96, 14: byte(i >> 8), 15: byte(i)})
		ports[i] = model.ServicePort{
			Name:     model.ServicePortName{Namespace: "ns" + strconv.Itoa(i%100), Name: "svc" + strconv.Itoa(i), Port: "http"},
			Protocol: inet.TCP, Port: 80, ClusterIPs: []netip.Addr{v4, v6}, NodePort: uint16(20000 + i),
		}
		for _, k := range plan.VirtualKeys(node, &ports[i]) {
			svcs = append(svcs, kernelService(inet.TCP, k.Addr.String(), k.Port, stats(uint64(i), 10, 10, 1000, 1000)))
		}
	}
	return node, ports, svcs
}

// BenchmarkServiceTraffic10000 measures, at 10,000 service ports, what the
// traffic metrics cost outside the kernel: mapping a full sync's state to
// virtual servers (map), accounting one dump of 40,000 virtual servers to
// their ports (refresh; the dump itself is ipvs's
// BenchmarkServicesDump10000, in the VM), and one scrape of the 50,000
// series (scrape).
func BenchmarkServiceTraffic10000(b *testing.B) {
	node, ports, svcs := benchTraffic()
	ctx := context.Background()
	planned := plannedOf(node, ports...)
	b.Run("map", func(b *testing.B) {
		for range b.N {
			tr := New(&fakeLister{}, time.Now)
			tr.Replace(ports, planned)
		}
	})
	k := &fakeLister{svcs: svcs}
	tr := New(k, time.Now)
	tr.Replace(ports, planned)
	if err := tr.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("refresh", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := tr.Refresh(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(svcs)), "virtual-servers/op")
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(tr)
	b.Run("scrape", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			mfs, err := reg.Gather()
			if err != nil || len(mfs) != 3 {
				b.Fatalf("%d families, %v", len(mfs), err)
			}
		}
	})
}
