package proxier

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/internal/traffic"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/prometheus/client_golang/prometheus"
)

// The proxier keeps the map of virtual servers to service ports after
// every sync: whole after a full one, by the changes after the others.
func TestKeepsTrafficMap(t *testing.T) {
	m := metrics.New()
	vs := func(addr string, port uint16, conns uint64) ipvs.Service {
		return ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr(addr), Port: port, Scheduler: "rr",
			Stats: ipvs.Stats{Connections: conns}}
	}
	// The fake node's IPVS keeps no statistics: the traffic comes from a
	// list of virtual servers of the test's.
	kernel := []ipvs.Service{vs("10.96.0.80", 80, 1), vs("192.0.2.10", 30080, 2), vs("198.51.100.7", 80, 4)}
	p := newTestProxier(t, setup{metrics: m, traffic: traffic.New(listerFunc(func() []ipvs.Service { return kernel }), time.Now)})
	p.listed(t, webManifest)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.traffic)
	// connections syncs, reads the kernel, and returns the service ports'
	// connections counted so far, and how many ports there are.
	connections := func() (total float64, ports int) {
		t.Helper()
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := p.traffic.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "ipvsplane_service_connections_total" {
				for _, s := range mf.GetMetric() {
					total += s.GetCounter().GetValue()
					ports++
				}
			}
		}
		return total, ports
	}
	if got, _ := connections(); got != 3 {
		t.Errorf("after the full sync: %v connections, want 3 (cluster IP and node port)", got)
	}
	feed(t, p.tracker, strings.Replace(webManifest, "clusterIP: 10.96.0.80", "clusterIP: 10.96.0.80\n  externalIPs: [198.51.100.7]", 1))
	kernel[0].Stats.Connections = 2
	if got, _ := connections(); got != 3+5 {
		t.Errorf("after adding an external IP: %v connections, want 8 (1 more on the cluster IP, the external IP's 4)", got)
	}
	p.tracker.DeleteService("demo", "web")
	if _, ports := connections(); ports != 0 {
		t.Errorf("after the removal: %d ports", ports)
	}
}

// listerFunc is a traffic.Lister of a function's virtual servers.
type listerFunc func() []ipvs.Service

func (f listerFunc) Services(context.Context) ([]ipvs.Service, error) { return f(), nil }
