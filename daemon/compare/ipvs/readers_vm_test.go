//go:build vmtest

package ipvs_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
	mobyipvs "github.com/moby/ipvs"
)

// moby/ipvs, the IPVS client Docker and (through its copy) kube-proxy
// use, is the second independent reader of what package ipvs writes,
// beside ipvsadm in package ipvs's own tests: a table with each kind of
// service and destination, and the timeouts, read by both libraries, must
// agree.
func TestMobyReadsTable(t *testing.T) {
	testutil.RequireVM(t)
	ns := testutil.NewNetNS(t)
	c := testutil.Open(t, func() (*ipvs.Conn, error) { return ipvs.Dial(&ipvs.Config{NetNS: ns.FD()}) })
	h, err := mobyipvs.New(fmt.Sprintf("/proc/self/fd/%d", ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	addr := netip.MustParseAddr
	var batch ipvs.Batch
	for _, v := range []ipvs.VirtualServer{
		{Service: ipvs.Service{Protocol: inet.TCP, Addr: addr("10.96.0.1"), Port: 80, Scheduler: "rr"}, Destinations: []ipvs.Destination{
			{Addr: addr("10.244.0.1"), Port: 8080, Weight: 1},
			{Addr: addr("10.244.0.2"), Port: 8080, Forward: ipvs.Route, Weight: 2, UpperThreshold: 100, LowerThreshold: 10},
			{Addr: addr("10.244.0.3"), Port: 8080, Forward: ipvs.Tunnel, Weight: 3, TunnelType: ipvs.GUE, TunnelPort: 6080, TunnelFlags: ipvs.TunnelChecksum},
			{Addr: addr("10.244.0.4"), Port: 8080, Weight: 0, Drained: true},
		}},
		{Service: ipvs.Service{Protocol: inet.UDP, Addr: addr("10.96.0.2"), Port: 53, Scheduler: "wrr", Flags: ipvs.OnePacket}},
		{Service: ipvs.Service{Protocol: inet.TCP, Addr: addr("10.96.0.3"), Port: 443, Scheduler: "rr",
			Flags: ipvs.Persistent, Timeout: 60 * time.Second, Netmask: 24}},
		{Service: ipvs.Service{Protocol: inet.SCTP, Addr: addr("10.96.0.4"), Port: 9, Scheduler: "lc"}},
		{Service: ipvs.Service{Protocol: inet.TCP, Addr: addr("fd00:96::1"), Port: 80, Scheduler: "rr",
			Flags: ipvs.Persistent, Timeout: 300 * time.Second, Netmask: 64}, Destinations: []ipvs.Destination{
			{Addr: addr("fd00:244::1"), Port: 8080, Weight: 1},
		}},
		{Service: ipvs.Service{Family: inet.IPv4, FirewallMark: 42, Scheduler: "rr"}, Destinations: []ipvs.Destination{
			{Addr: addr("10.244.1.1"), Weight: 1},
		}},
		{Service: ipvs.Service{Family: inet.IPv6, FirewallMark: 43, Scheduler: "rr"}},
	} {
		batch.CreateService(v.Service)
		for _, d := range v.Destinations {
			batch.CreateDestination(v.Service, d)
		}
	}
	if err := c.Apply(ctx, &batch); err != nil {
		t.Fatal(err)
	}
	want, err := c.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// moby/ipvs knows no tunnel settings.
	if got, want := normalize(mobyTable(t, h)), normalize(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("moby/ipvs:\n got %+v\nwant %+v", got, want)
	}

	if err := c.SetTimeouts(ctx, ipvs.Timeouts{TCP: 901 * time.Second, TCPFin: 121 * time.Second, UDP: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	mc, err := h.GetConfig()
	if err != nil || mc.TimeoutTCP != 901*time.Second || mc.TimeoutTCPFin != 121*time.Second || mc.TimeoutUDP != 30*time.Second {
		t.Fatalf("moby GetConfig: %+v, %v", mc, err)
	}
}

// normalize keeps what both readers see: no counters, no tunnel
// settings, no address of a firewall-mark service, and services and
// destinations in a fixed order.
func normalize(vs []ipvs.VirtualServer) []ipvs.VirtualServer {
	out := []ipvs.VirtualServer{}
	for _, v := range vs {
		s := v.Service
		s.Stats = ipvs.Stats{}
		s.Flags &^= ipvs.Hashed
		if s.FirewallMark != 0 {
			s.Protocol, s.Addr, s.Port = 0, netip.Addr{}, 0
		}
		ds := []ipvs.Destination{}
		for _, d := range v.Destinations {
			d.Stats = ipvs.Stats{}
			d.ActiveConnections, d.InactiveConnections, d.PersistentConnections = 0, 0, 0
			d.TunnelType, d.TunnelPort, d.TunnelFlags = 0, 0, 0
			ds = append(ds, d)
		}
		slices.SortFunc(ds, func(a, b ipvs.Destination) int { return strings.Compare(a.String(), b.String()) })
		out = append(out, ipvs.VirtualServer{Service: s, Destinations: ds})
	}
	slices.SortFunc(out, func(a, b ipvs.VirtualServer) int { return strings.Compare(a.Service.String(), b.Service.String()) })
	return out
}

// mobyTable reads the table with moby/ipvs, one dump per service.
func mobyTable(t *testing.T, h *mobyipvs.Handle) []ipvs.VirtualServer {
	t.Helper()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	var out []ipvs.VirtualServer
	for _, ms := range svcs {
		f := inet.Family(ms.AddressFamily)
		s := ipvs.Service{
			Family: f, Protocol: inet.Protocol(ms.Protocol), Port: ms.Port,
			FirewallMark: ms.FWMark, Scheduler: ipvs.Scheduler(ms.SchedName), Flags: ipvs.ServiceFlags(ms.Flags),
			Timeout: time.Duration(ms.Timeout) * time.Second, PersistenceEngine: ms.PEName,
			Netmask: mobyNetmask(f, ms.Netmask),
		}
		if ms.FWMark == 0 {
			s.Addr = ipAddr(ms.Address, f)
		} else {
			s.Protocol, s.Port = 0, 0
		}
		dests, err := h.GetDestinations(ms)
		if err != nil {
			t.Fatal(err)
		}
		var ds []ipvs.Destination
		for _, md := range dests {
			ds = append(ds, ipvs.Destination{
				Addr: ipAddr(md.Address, inet.Family(md.AddressFamily)), Port: md.Port, Weight: md.Weight, Drained: md.Weight == 0,
				Forward: ipvs.ForwardMethod(md.ConnectionFlags & connFwdMask), UpperThreshold: md.UpperThreshold,
				LowerThreshold: md.LowerThreshold,
			})
		}
		out = append(out, ipvs.VirtualServer{Service: s, Destinations: ds})
	}
	return out
}

// connFwdMask is IP_VS_CONN_F_FWD_MASK: the forwarding method's bits of a
// destination's connection flags.
const connFwdMask = 0x0007

func ipAddr(ip net.IP, f inet.Family) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	if f == inet.IPv4 {
		return a.Unmap()
	}
	return a
}

// mobyNetmask converts moby/ipvs's raw netmask (the attribute read as a
// host integer) to a prefix length.
func mobyNetmask(f inet.Family, raw uint32) int {
	if f == inet.IPv6 {
		return int(raw)
	}
	return bits.OnesCount32(binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, raw)))
}
