//go:build vmtest

package ipvs_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/ipvsbench"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// mobyEnv is a benchmark's namespace with moby/ipvs's handle beside this
// library's Conn.
type mobyEnv struct {
	*ipvsbench.Env
	moby *mobyipvs.Handle
}

func mobySetup(b *testing.B) *mobyEnv {
	b.Helper()
	e := ipvsbench.Setup(b)
	b.StopTimer()
	defer b.StartTimer()
	h, err := mobyipvs.New(fmt.Sprintf("/proc/self/fd/%d", e.NS.FD()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	return &mobyEnv{Env: e, moby: h}
}

func mobyService(s ipvs.Service) *mobyipvs.Service {
	return &mobyipvs.Service{
		AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.IP(s.Addr.AsSlice()),
		Port: s.Port, SchedName: string(s.Scheduler), Netmask: 0xffffffff,
	}
}

func restoreScript(table []ipvs.VirtualServer) string {
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
// kube-proxy does), ipvsadm -R and Batch; package ipvs's benchmark of the
// same name adds the batching floor (floor-512) to the group.
func BenchmarkCreate2000x4(b *testing.B) {
	table := ipvsbench.Table()

	b.Run("moby", func(b *testing.B) {
		for range b.N {
			e := mobySetup(b)
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
			e.Verify(b)
		}
		b.ReportMetric(float64(ipvsbench.Ops), "ops/op")
	})

	script := restoreScript(table)
	b.Run("ipvsadm-restore", func(b *testing.B) {
		testutil.RequireProgram(b, "ipvsadm")
		for range b.N {
			e := ipvsbench.Setup(b)
			err := e.NS.Do(func() error {
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
			e.Verify(b)
		}
		b.ReportMetric(float64(ipvsbench.Ops), "ops/op")
	})

	b.Run("batch", func(b *testing.B) {
		var batch ipvs.Batch
		for range b.N {
			e := ipvsbench.Setup(b)
			ipvsbench.Creation(&batch, table)
			if err := e.C.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			e.Verify(b)
		}
		b.ReportMetric(float64(ipvsbench.Ops), "ops/op")
	})
}

// BenchmarkList2000x4 reads the whole table back: moby/ipvs with one dump
// per service (the baseline), ipvsadm -S, and Table, which pipelines the
// per-service dumps.
func BenchmarkList2000x4(b *testing.B) {
	e := mobySetup(b)
	e.Fill(b, ipvsbench.Table())
	want := ipvsbench.Services * ipvsbench.Reals

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
		testutil.RequireProgram(b, "ipvsadm")
		for range b.N {
			out, err := e.NS.Output(context.Background(), "ipvsadm", "-S", "-n")
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
			table, err := e.C.Table(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if n := ipvsbench.Destinations(table); n != want {
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
	e := mobySetup(b)
	var batch ipvs.Batch
	for i := range dumpServices {
		batch.CreateService(ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"})
	}
	if err := e.C.Apply(context.Background(), &batch); err != nil {
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
			svcs, err := e.C.Services(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if len(svcs) != dumpServices {
				b.Fatalf("%d services", len(svcs))
			}
		}
	})
}
