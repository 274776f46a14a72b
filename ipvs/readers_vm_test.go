//go:build vmtest

package ipvs

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

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	mobyipvs "github.com/moby/ipvs"
)

// env is one test's namespace, with this package's Conn and the two
// independent readers: ipvsadm and moby/ipvs.
type env struct {
	t    *testing.T
	ns   *testutil.NetNS
	c    *Conn
	moby *mobyipvs.Handle
}

func setup(t *testing.T) *env {
	t.Helper()
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ipvsadm")
	ns := testutil.NewNetNS(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h, err := mobyipvs.New(fmt.Sprintf("/proc/self/fd/%d", ns.FD()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &env{t: t, ns: ns, c: c, moby: h}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// check compares the kernel's table, as this package, ipvsadm and
// moby/ipvs each read it, with want.
func (e *env) check(want []VirtualServer) {
	e.t.Helper()
	want = normalize(want)
	got, err := e.c.Table(ctx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	if got := normalize(got); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("Table:\n got %+v\nwant %+v", got, want)
	}
	if got, want := e.ipvsadmSave(), saveLines(want); !slices.Equal(got, want) {
		e.t.Fatalf("ipvsadm -S -n:\n got %q\nwant %q", got, want)
	}
	// moby/ipvs knows neither tunnel settings nor thresholds it did not set.
	if got, want := e.mobyTable(), withoutTunnel(want); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("moby/ipvs:\n got %+v\nwant %+v", got, want)
	}
}

func (e *env) ipvsadmSave() []string {
	e.t.Helper()
	out := e.ns.Run(e.t, "ipvsadm", "-S", "-n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines
}

// normalize keeps what a test sets: no counters, and services and
// destinations in a fixed order.
func normalize(vs []VirtualServer) []VirtualServer {
	out := []VirtualServer{}
	for _, v := range vs {
		s := v.Service
		s.Family = s.family()
		s.Stats = Stats{}
		s.Flags &^= Hashed
		if s.Netmask == 0 {
			s.Netmask = s.Family.bits()
		}
		if s.Scheduler == "" {
			s.Scheduler = DefaultScheduler
		}
		if s.FirewallMark != 0 {
			s.Protocol, s.Addr, s.Port = 0, netip.Addr{}, 0
		}
		ds := []Destination{}
		for _, d := range v.Destinations {
			d.Stats = Stats{}
			d.ActiveConnections, d.InactiveConnections, d.PersistentConnections = 0, 0, 0
			if d.Forward != Tunnel {
				d.TunnelType, d.TunnelPort, d.TunnelFlags = 0, 0, 0
			}
			ds = append(ds, d)
		}
		slices.SortFunc(ds, func(a, b Destination) int { return strings.Compare(a.String(), b.String()) })
		out = append(out, VirtualServer{Service: s, Destinations: ds})
	}
	slices.SortFunc(out, func(a, b VirtualServer) int { return strings.Compare(a.Service.String(), b.Service.String()) })
	return out
}

func withoutTunnel(vs []VirtualServer) []VirtualServer {
	out := make([]VirtualServer, len(vs))
	for i, v := range vs {
		out[i] = VirtualServer{Service: v.Service, Destinations: make([]Destination, len(v.Destinations))}
		for j, d := range v.Destinations {
			d.TunnelType, d.TunnelPort, d.TunnelFlags = 0, 0, 0
			out[i].Destinations[j] = d
		}
	}
	return out
}

// mobyTable reads the table with moby/ipvs, one dump per service.
func (e *env) mobyTable() []VirtualServer {
	e.t.Helper()
	svcs, err := e.moby.GetServices()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []VirtualServer
	for _, ms := range svcs {
		s := Service{
			Family: Family(ms.AddressFamily), Protocol: Protocol(ms.Protocol), Port: ms.Port,
			FirewallMark: ms.FWMark, Scheduler: Scheduler(ms.SchedName), Flags: ServiceFlags(ms.Flags) &^ Hashed,
			Timeout: time.Duration(ms.Timeout) * time.Second, PersistenceEngine: ms.PEName,
			Netmask: mobyNetmask(Family(ms.AddressFamily), ms.Netmask),
		}
		if ms.FWMark == 0 {
			s.Addr = ipAddr(ms.Address, s.Family)
		} else {
			s.Protocol, s.Port = 0, 0
		}
		dests, err := e.moby.GetDestinations(ms)
		if err != nil {
			e.t.Fatal(err)
		}
		var ds []Destination
		for _, md := range dests {
			ds = append(ds, Destination{
				Addr: ipAddr(md.Address, Family(md.AddressFamily)), Port: md.Port, Weight: md.Weight, Drained: md.Weight == 0,
				Forward: ForwardMethod(md.ConnectionFlags & connFwdMask), UpperThreshold: md.UpperThreshold,
				LowerThreshold: md.LowerThreshold,
			})
		}
		out = append(out, VirtualServer{Service: s, Destinations: ds})
	}
	return normalize(out)
}

func ipAddr(ip net.IP, f Family) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	if f == IPv4 {
		return a.Unmap()
	}
	return a
}

// mobyNetmask converts moby/ipvs's raw netmask (the attribute read as a
// host integer) to a prefix length.
func mobyNetmask(f Family, raw uint32) int {
	if f == IPv6 {
		return int(raw)
	}
	return bits.OnesCount32(binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, raw)))
}

// saveLines is what `ipvsadm -S -n` prints for a table, sorted.
func saveLines(vs []VirtualServer) []string {
	var lines []string
	for _, v := range vs {
		s := v.Service
		var key string
		switch {
		case s.FirewallMark != 0 && s.Family == IPv6:
			key = fmt.Sprintf("-f %d -6", s.FirewallMark)
		case s.FirewallMark != 0:
			key = fmt.Sprintf("-f %d", s.FirewallMark)
		case s.Protocol == TCP:
			key = "-t " + netip.AddrPortFrom(s.Addr, s.Port).String()
		case s.Protocol == UDP:
			key = "-u " + netip.AddrPortFrom(s.Addr, s.Port).String()
		default:
			key = "--sctp-service " + netip.AddrPortFrom(s.Addr, s.Port).String()
		}
		line := "-A " + key + " -s " + string(s.Scheduler)
		if s.Flags&Persistent != 0 {
			line += fmt.Sprintf(" -p %d", s.Timeout/time.Second)
			if s.Netmask != s.Family.bits() {
				if s.Family == IPv4 {
					m := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-s.Netmask))))
					line += " -M " + m.String()
				} else {
					line += fmt.Sprintf(" -M %d", s.Netmask)
				}
			}
		}
		if s.PersistenceEngine != "" {
			line += " --pe " + s.PersistenceEngine
		}
		if s.Flags&OnePacket != 0 {
			line += " -o"
		}
		var sf []string
		if s.Flags&svcFlagSched1 != 0 {
			sf = append(sf, string(s.Scheduler)+"-fallback")
		}
		if s.Flags&svcFlagSched2 != 0 {
			sf = append(sf, string(s.Scheduler)+"-port")
		}
		if len(sf) > 0 {
			line += " -b " + strings.Join(sf, ",")
		}
		lines = append(lines, line)
		for _, d := range v.Destinations {
			dl := "-a " + key + " -r " + netip.AddrPortFrom(d.Addr, d.Port).String()
			switch d.Forward {
			case Masquerade:
				dl += " -m"
			case Route:
				dl += " -g"
			case Tunnel:
				dl += " -i"
			}
			dl += fmt.Sprintf(" -w %d", d.Weight)
			if d.Forward == Tunnel {
				dl += " --tun-type " + d.TunnelType.String()
				if d.TunnelType == GUE {
					dl += fmt.Sprintf(" --tun-port %d", d.TunnelPort)
				}
				if d.TunnelType != IPIP {
					switch {
					case d.TunnelFlags&TunnelRemoteChecksum != 0:
						dl += " --tun-remcsum"
					case d.TunnelFlags&TunnelChecksum != 0:
						dl += " --tun-csum"
					default:
						dl += " --tun-nocsum"
					}
				}
			}
			lines = append(lines, dl)
		}
	}
	slices.Sort(lines)
	return lines
}

func contextCancelled() (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c, cancel
}
