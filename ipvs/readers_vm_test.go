//go:build vmtest

package ipvs

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// env is one test's namespace, with this package's Conn; ipvsadm is the
// independent reader. (moby/ipvs, the other one, reads tables in
// daemon/compare/ipvs, whose module may require it.)
type env struct {
	t  *testing.T
	ns *testutil.NetNS
	c  *Conn
}

func setup(t *testing.T) *env {
	t.Helper()
	testutil.RequireVM(t)
	testutil.RequireProgram(t, "ipvsadm")
	ns := testutil.NewNetNS(t)
	c := testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: ns.FD()}) })
	return &env{t: t, ns: ns, c: c}
}

// check compares the kernel's table, as this package and ipvsadm each
// read it, with want.
func (e *env) check(want []VirtualServer) {
	e.t.Helper()
	want = normalize(want)
	got, err := e.c.Table(testutil.Context(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	if got := normalize(got); !reflect.DeepEqual(got, want) {
		e.t.Fatalf("Table:\n got %+v\nwant %+v", got, want)
	}
	if got, want := e.ipvsadmSave(), saveLines(want); !slices.Equal(got, want) {
		e.t.Fatalf("ipvsadm -S -n:\n got %q\nwant %q", got, want)
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
			s.Netmask = s.Family.Bits()
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

// saveLines is what `ipvsadm -S -n` prints for a table, sorted.
func saveLines(vs []VirtualServer) []string {
	var lines []string
	for _, v := range vs {
		s := v.Service
		var key string
		switch {
		case s.FirewallMark != 0 && s.Family == inet.IPv6:
			key = fmt.Sprintf("-f %d -6", s.FirewallMark)
		case s.FirewallMark != 0:
			key = fmt.Sprintf("-f %d", s.FirewallMark)
		case s.Protocol == inet.TCP:
			key = "-t " + netip.AddrPortFrom(s.Addr, s.Port).String()
		case s.Protocol == inet.UDP:
			key = "-u " + netip.AddrPortFrom(s.Addr, s.Port).String()
		default:
			key = "--sctp-service " + netip.AddrPortFrom(s.Addr, s.Port).String()
		}
		line := "-A " + key + " -s " + string(s.Scheduler)
		if s.Flags&Persistent != 0 {
			line += fmt.Sprintf(" -p %d", s.Timeout/time.Second)
			if s.Netmask != s.Family.Bits() {
				if s.Family == inet.IPv4 {
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
