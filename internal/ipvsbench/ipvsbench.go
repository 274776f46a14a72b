// Package ipvsbench holds what package ipvs's benchmarks share with their
// comparisons against other IPVS clients, which live in the daemon module
// (daemon/compare/ipvs) so that the library's module does not require
// those clients: the benchmark table and a fresh namespace to build it in.
package ipvsbench

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// The benchmark table's size.
const (
	Services = 2000
	Reals    = 4
)

// Table is 2,000 TCP services with 4 masquerading real servers each.
func Table() []ipvs.VirtualServer {
	out := make([]ipvs.VirtualServer, Services)
	for i := range out {
		s := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		v := ipvs.VirtualServer{Service: s}
		for j := range Reals {
			v.Destinations = append(v.Destinations, ipvs.Destination{
				Addr: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: uint16(8080 + j), Weight: 1,
			})
		}
		out[i] = v
	}
	return out
}

// Ops is how many kernel operations building Table takes.
const Ops = Services * (1 + Reals)

// Env is a benchmark's namespace with this library's Conn in it.
type Env struct {
	NS *testutil.NetNS
	C  *ipvs.Conn
}

// Setup makes a fresh namespace, with the timer stopped. The benchmarks
// take a new one for every run: deleted destinations linger in a
// per-namespace trash list (ip_vs_ctl.c) that every later creation
// searches, so a flushed table is not an empty one.
func Setup(b *testing.B) *Env {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	testutil.RequireVM(b)
	ns := testutil.NewNetNS(b)
	c, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return &Env{NS: ns, C: c}
}

// Verify checks, with the timer stopped, that the kernel holds the whole
// of Table.
func (e *Env) Verify(b *testing.B) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	table, err := e.C.Table(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if n := Destinations(table); len(table) != Services || n != Services*Reals {
		b.Fatalf("%d services, %d destinations", len(table), n)
	}
}

// Destinations counts the table's real servers.
func Destinations(table []ipvs.VirtualServer) int {
	n := 0
	for _, v := range table {
		n += len(v.Destinations)
	}
	return n
}

// Fill builds the table in the namespace with one Batch.
func (e *Env) Fill(b *testing.B, table []ipvs.VirtualServer) {
	b.Helper()
	var batch ipvs.Batch
	Creation(&batch, table)
	if err := e.C.Apply(context.Background(), &batch); err != nil {
		b.Fatal(err)
	}
}

// Creation resets batch to the creation of table.
func Creation(batch *ipvs.Batch, table []ipvs.VirtualServer) {
	batch.Reset()
	for _, v := range table {
		batch.CreateService(v.Service)
		for _, d := range v.Destinations {
			batch.CreateDestination(v.Service, d)
		}
	}
}
