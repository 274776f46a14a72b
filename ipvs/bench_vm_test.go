//go:build vmtest

package ipvs

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

const (
	benchServices = 2000
	benchReals    = 4
)

// benchTable is 2,000 TCP services with 4 masquerading real servers each.
func benchTable() []VirtualServer {
	out := make([]VirtualServer, benchServices)
	for i := range out {
		s := Service{Family: IPv4, Protocol: TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		v := VirtualServer{Service: s}
		for j := range benchReals {
			v.Destinations = append(v.Destinations, Destination{
				Addr: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: uint16(8080 + j), Weight: 1,
			})
		}
		out[i] = v
	}
	return out
}

type benchEnv struct {
	ns   *testutil.NetNS
	c    *Conn
	moby *mobyipvs.Handle
}

// benchSetup makes a fresh namespace with the three clients. The
// benchmarks take a new one for every run, outside the timer: deleted
// destinations linger in a per-namespace trash list (ip_vs_ctl.c) that
// every later creation searches, so a flushed table is not an empty one.
func benchSetup(b *testing.B) *benchEnv {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	testutil.RequireVM(b)
	testutil.RequireProgram(b, "ipvsadm")
	ns := testutil.NewNetNS(b)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	h, err := mobyipvs.New(fmt.Sprintf("/proc/self/fd/%d", ns.FD()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	return &benchEnv{ns: ns, c: c, moby: h}
}

// verify checks the kernel holds the whole table.
func (e *benchEnv) verify(b *testing.B) {
	b.Helper()
	b.StopTimer()
	table, err := e.c.Table(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, v := range table {
		n += len(v.Destinations)
	}
	if len(table) != benchServices || n != benchServices*benchReals {
		b.Fatalf("%d services, %d destinations", len(table), n)
	}
	b.StartTimer()
}

func mobyService(s Service) *mobyipvs.Service {
	return &mobyipvs.Service{
		AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.IP(s.Addr.AsSlice()),
		Port: s.Port, SchedName: string(s.Scheduler), Netmask: 0xffffffff,
	}
}

func restoreScript(table []VirtualServer) string {
	var sb strings.Builder
	for _, v := range table {
		fmt.Fprintf(&sb, "-A -t %s -s %s\n", netip.AddrPortFrom(v.Service.Addr, v.Service.Port), v.Service.Scheduler)
		for _, d := range v.Destinations {
			fmt.Fprintf(&sb, "-a -t %s -r %s -m -w %d\n", netip.AddrPortFrom(v.Service.Addr, v.Service.Port), d, d.Weight)
		}
	}
	return sb.String()
}

// BenchmarkCreate2000x4 builds 2,000 services with 4 real servers each
// from an empty table: moby/ipvs one call at a time (the baseline, what
// kube-proxy does), ipvsadm -R, Batch, and the same requests written 512
// to a sendmsg on a bare mdlayher/netlink socket, each acknowledged (the
// batching floor the issue measured).
func BenchmarkCreate2000x4(b *testing.B) {
	table := benchTable()
	ops := benchServices * (1 + benchReals)

	b.Run("moby", func(b *testing.B) {
		for range b.N {
			e := benchSetup(b)
			for _, v := range table {
				ms := mobyService(v.Service)
				if err := e.moby.NewService(ms); err != nil {
					b.Fatal(err)
				}
				for _, d := range v.Destinations {
					md := &mobyipvs.Destination{Address: net.IP(d.Addr.AsSlice()), Port: d.Port, Weight: d.Weight, AddressFamily: unix.AF_INET}
					if err := e.moby.NewDestination(ms, md); err != nil {
						b.Fatal(err)
					}
				}
			}
			e.verify(b)
		}
		b.ReportMetric(float64(ops), "ops/op")
	})

	script := restoreScript(table)
	b.Run("ipvsadm-restore", func(b *testing.B) {
		for range b.N {
			e := benchSetup(b)
			err := e.ns.Do(func() error {
				cmd := exec.Command("ipvsadm", "-R")
				cmd.Stdin = strings.NewReader(script)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("ipvsadm -R: %v: %s", err, stderr.String())
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			e.verify(b)
		}
		b.ReportMetric(float64(ops), "ops/op")
	})

	b.Run("batch", func(b *testing.B) {
		var batch Batch
		for range b.N {
			e := benchSetup(b)
			batch.Reset()
			for _, v := range table {
				batch.CreateService(v.Service)
				for _, d := range v.Destinations {
					batch.CreateDestination(v.Service, d)
				}
			}
			if err := e.c.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			e.verify(b)
		}
		b.ReportMetric(float64(ops), "ops/op")
	})

	b.Run("floor-512", func(b *testing.B) {
		msgs := rawRequests(b, table)
		for range b.N {
			e := benchSetup(b)
			b.StopTimer()
			nc, family := rawConn(b, e.ns)
			b.StartTimer()
			for start := 0; start < len(msgs); start += 512 {
				chunk := msgs[start:min(start+512, len(msgs))]
				for i := range chunk {
					chunk[i].Header.Type = netlink.HeaderType(family)
					chunk[i].Header.Sequence = 0
				}
				if _, err := nc.SendMessages(chunk); err != nil {
					b.Fatal(err)
				}
				for range chunk {
					if _, err := nc.Receive(); err != nil {
						b.Fatal(err)
					}
				}
			}
			e.verify(b)
		}
		b.ReportMetric(float64(ops), "ops/op")
	})
}

// rawRequests encodes the table's creation as this package would, for the
// floor measurement.
func rawRequests(b *testing.B, table []VirtualServer) []netlink.Message {
	var msgs []netlink.Message
	add := func(o op) {
		var w nl.Writer
		o.encode(&w)
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Flags: netlink.Request | netlink.Acknowledge},
			Data:   append([]byte{o.command(), genlVersion, 0, 0}, w.B...),
		})
	}
	for _, v := range table {
		add(op{kind: opCreateService, svc: v.Service})
		for _, d := range v.Destinations {
			add(op{kind: opCreateDestination, svc: v.Service, dest: d})
		}
	}
	return msgs
}

func rawConn(b *testing.B, ns *testutil.NetNS) (*netlink.Conn, uint16) {
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	f, err := genetlink.NewConn(nc).GetFamily(genlName)
	if err != nil {
		b.Fatal(err)
	}
	if err := nc.SetReadBuffer(8 << 20); err != nil {
		b.Fatal(err)
	}
	return nc, f.ID
}

// BenchmarkList2000x4 reads the whole table back: moby/ipvs with one dump
// per service (the baseline), ipvsadm -S, and Table, which pipelines the
// per-service dumps.
func BenchmarkList2000x4(b *testing.B) {
	e := benchSetup(b)
	var batch Batch
	for _, v := range benchTable() {
		batch.CreateService(v.Service)
		for _, d := range v.Destinations {
			batch.CreateDestination(v.Service, d)
		}
	}
	if err := e.c.Apply(context.Background(), &batch); err != nil {
		b.Fatal(err)
	}
	want := benchServices * benchReals

	b.Run("moby", func(b *testing.B) {
		for range b.N {
			svcs, err := e.moby.GetServices()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, s := range svcs {
				ds, err := e.moby.GetDestinations(s)
				if err != nil {
					b.Fatal(err)
				}
				n += len(ds)
			}
			if n != want {
				b.Fatalf("%d destinations", n)
			}
		}
	})
	b.Run("ipvsadm-save", func(b *testing.B) {
		for range b.N {
			out, err := e.ns.Output(context.Background(), "ipvsadm", "-S", "-n")
			if err != nil {
				b.Fatal(err)
			}
			if n := strings.Count(out, "-a "); n != want {
				b.Fatalf("%d destinations", n)
			}
		}
	})
	b.Run("table", func(b *testing.B) {
		for range b.N {
			table, err := e.c.Table(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, v := range table {
				n += len(v.Destinations)
			}
			if n != want {
				b.Fatalf("%d destinations", n)
			}
		}
	})
}

// dumpServices is the size of BenchmarkServicesDump10000's table.
const dumpServices = 10000

// BenchmarkServicesDump10000 times one dump of 10,000 services with their
// counters, which is what ipvsplane's --service-traffic-metrics costs the
// kernel every interval: moby/ipvs's GetServices (the baseline, also one
// dump) and Services, each decoding every service's STATS64.
func BenchmarkServicesDump10000(b *testing.B) {
	e := benchSetup(b)
	var batch Batch
	for i := range dumpServices {
		batch.CreateService(Service{Family: IPv4, Protocol: TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"})
	}
	if err := e.c.Apply(context.Background(), &batch); err != nil {
		b.Fatal(err)
	}
	b.Run("moby", func(b *testing.B) {
		for range b.N {
			svcs, err := e.moby.GetServices()
			if err != nil {
				b.Fatal(err)
			}
			if len(svcs) != dumpServices {
				b.Fatalf("%d services", len(svcs))
			}
		}
	})
	b.Run("services", func(b *testing.B) {
		for range b.N {
			svcs, err := e.c.Services(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if len(svcs) != dumpServices {
				b.Fatalf("%d services", len(svcs))
			}
		}
	})
}
