package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Where benchServices takes its addresses from: the cluster IPs from the
// service range 10.96.0.0/12 (1,048,576 of them), the endpoints from the
// pod range 10.128.0.0/9 (8,388,608, ten per service).
const (
	benchServiceBase  = 10<<24 | 96<<16
	benchEndpointBase = 10<<24 | 128<<16
)

// benchAddr is the IPv4 address base+i.
func benchAddr(base, i uint32) netip.Addr {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], base+i)
	return netip.AddrFrom4(a)
}

// benchServices returns n services with 10 endpoints each, spread over 10
// nodes; one in ten has a node port, as in kube-proxy's own scale tests,
// up to 2,000 of them (the node-port range holds 2,768). Addresses are
// distinct up to 838,860 services.
func benchServices(n int) []model.ServicePort {
	services := make([]model.ServicePort, n)
	for i := range services {
		s := model.ServicePort{
			Name:       model.ServicePortName{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i), Port: "http"},
			Protocol:   inet.TCP,
			Port:       80,
			ClusterIPs: []netip.Addr{benchAddr(benchServiceBase, uint32(i))},
		}
		if i%10 == 0 && i/10 < 2000 {
			s.NodePort = uint16(30000 + i/10)
		}
		for e := range 10 {
			s.Endpoints = append(s.Endpoints, model.Endpoint{
				Addr:     benchAddr(benchEndpointBase, uint32(i*10+e)),
				Port:     8080,
				Ready:    true,
				Serving:  true,
				NodeName: fmt.Sprintf("node-%c", 'a'+e),
			})
		}
		services[i] = s
	}
	return services
}

func benchNode() model.Node {
	return model.Node{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.1")}, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/9")}}
}

// heapMiB is the live heap after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// The memory the dataplane keeps for a first sync of n services, without
// a kernel: the desired state, the plan, and the programmed state once
// every operation succeeded. They are all alive at the end of the first
// sync, the daemon's peak.
func BenchmarkFirstSyncMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			state := &model.State{Node: benchNode(), Services: benchServices(n)}
			for b.Loop() {
				base := heapMiB()
				p := plan.NewPlanner(nftrules.Render)
				p.Update(state)
				desired, owners := p.Desired()
				planned := heapMiB()
				pl := plan.Diff(plan.NewKernelState(), desired, owners, plan.FullScope, plan.Drain{})
				diffed := heapMiB()
				programmed := plan.NewKernelState()
				for op := range pl.All() {
					programmed.Record(op)
				}
				recorded := heapMiB()
				b.ReportMetric(planned-base, "desired-MiB")
				b.ReportMetric(diffed-planned, "plan-MiB")
				b.ReportMetric(recorded-diffed, "programmed-MiB")
				b.ReportMetric(float64(pl.Len()), "plan-ops")
				runtime.KeepAlive(p)
				runtime.KeepAlive(pl)
				runtime.KeepAlive(programmed)
			}
		})
	}
}

// The largest size benchSizes accepts still has its addresses in their
// ranges, and no address repeats where the old byte-wise scheme wrapped.
func TestBenchAddrs(t *testing.T) {
	const most = 838860
	services, pods := netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.128.0.0/9")
	if a := benchAddr(benchServiceBase, most-1); !services.Contains(a) {
		t.Errorf("cluster IP %v outside %v", a, services)
	}
	if a := benchAddr(benchEndpointBase, most*10-1); !pods.Contains(a) {
		t.Errorf("endpoint %v outside %v", a, pods)
	}
	if benchAddr(benchEndpointBase, 10) == benchAddr(benchEndpointBase, 65536*10) {
		t.Error("services 1 and 65,537 share an endpoint address")
	}
}

// A full compare of a kernel that holds what it should, as the sync after
// each periodic reread makes: it must find nothing, cheaply.
func BenchmarkFullCompare(b *testing.B) {
	state := &model.State{Node: benchNode(), Services: benchServices(10000)}
	p := plan.NewPlanner(nftrules.Render)
	p.Update(state)
	desired, owners := p.Desired()
	programmed := plan.NewKernelState()
	for op := range plan.Diff(programmed, desired, owners, plan.FullScope, plan.Drain{}).All() {
		programmed.Record(op)
	}
	for b.Loop() {
		if pl := plan.Diff(programmed, desired, owners, plan.FullScope, plan.Drain{}); pl.Len() != 0 {
			b.Fatalf("%d operations", pl.Len())
		}
	}
}
