package planner

import (
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// VirtualKey identifies an IPVS virtual server.
type VirtualKey struct {
	Addr     netip.Addr
	Port     uint16
	Protocol inet.Protocol
}

// String returns "TCP 10.96.0.1:80" or "TCP [fd00::1]:80", and for the
// zero address, a node port on every address, "TCP *:30080"
// (inet.VirtualServer).
func (k VirtualKey) String() string {
	return inet.VirtualServer(k.Protocol, k.Addr, k.Port)
}

// compare orders keys by family, address, port and protocol.
func (k VirtualKey) compare(o VirtualKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if k.Port != o.Port {
		return int(k.Port) - int(o.Port)
	}
	return int(k.Protocol) - int(o.Protocol)
}

// VirtualServer is the desired or observed configuration of an IPVS
// virtual server.
type VirtualServer struct {
	VirtualKey
	Scheduler string
	// SchedulerFlags are the kernel's numbered scheduler flags
	// (SchedFlag1-3) only: the kernel keeps nothing else.
	SchedulerFlags model.SchedulerFlags
	// Persistence is the ClientIP affinity timeout; 0 means none. The
	// persistence netmask is always a single host.
	Persistence time.Duration
}

// String returns the server as the plan prints it.
func (v VirtualServer) String() string {
	s := v.VirtualKey.String() + " " + v.Scheduler
	if v.SchedulerFlags != 0 {
		s += " " + v.SchedulerFlags.Named(v.Scheduler).String()
	}
	if v.Persistence > 0 {
		s += " persistent " + strconv.Itoa(int(v.Persistence/time.Second)) + "s"
	}
	return s
}

// RealKey identifies a real server of a virtual server.
type RealKey struct {
	Addr netip.Addr
	Port uint16
}

func (k RealKey) String() string { return netip.AddrPortFrom(k.Addr, k.Port).String() }

// compare orders real servers by address and port.
func (k RealKey) compare(o RealKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	return int(k.Port) - int(o.Port)
}

// RealServer is a real server's weight and, when observed, its connection
// counts.
type RealServer struct {
	RealKey
	Weight        int
	ActiveConns   uint32
	InactiveConns uint32
}

// SetType is an ipset type.
type SetType string

// The ipset types kube-proxy's IPVS mode uses.
const (
	HashIP        SetType = "hash:ip"
	HashIPPort    SetType = "hash:ip,port"
	HashIPPortIP  SetType = "hash:ip,port,ip"
	HashIPPortNet SetType = "hash:ip,port,net"
	BitmapPort    SetType = "bitmap:port"
)

// SetSpec is how an ipset is created.
type SetSpec struct {
	Name   string
	Type   SetType
	Family inet.Family // ignored by bitmap:port
	// Comment says what the set holds; the rules that match it carry it.
	Comment  string
	HashSize uint32 // hash types only
	MaxElem  uint32 // hash types only
}

// setEntry is one member of a named ipset.
type setEntry struct {
	Set   string
	Entry Entry
}

// KernelState is what the dataplane owns in the kernel, observed or
// desired: virtual servers with their real servers, the addresses bound to
// the dummy device, the ipsets, and the rendered packet rules.
type KernelState struct {
	Virtual   map[VirtualKey]VirtualServer
	Reals     map[VirtualKey]Reals
	Addresses map[netip.Addr]bool
	Sets      map[string]SetSpec
	Entries   map[string]map[Entry]bool
	// Rules is the packet-rule table in its printed form; the table is
	// replaced whole when this differs.
	Rules string
	// KubeProxyChains lists the iptables chains kube-proxy left (observed
	// only): a node taken over from kube-proxy has them until ipvsplane's
	// own rules are in place.
	KubeProxyChains []KubeProxyChain
}

// NewKernelState returns an empty state.
func NewKernelState() *KernelState {
	return &KernelState{
		Virtual:   map[VirtualKey]VirtualServer{},
		Reals:     map[VirtualKey]Reals{},
		Addresses: map[netip.Addr]bool{},
		Sets:      map[string]SetSpec{},
		Entries:   map[string]map[Entry]bool{},
	}
}

// Reals is a virtual server's real servers, sorted by address and port. A
// sorted slice costs a fraction of a map for the handful of real servers a
// service has, and a cluster has hundreds of thousands of them.
type Reals []RealServer

// NewReals sorts rs and keeps the last of any duplicates.
func NewReals(rs []RealServer) Reals {
	slices.SortStableFunc(rs, func(a, b RealServer) int { return a.RealKey.compare(b.RealKey) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].RealKey == r.RealKey {
			out[n-1] = r
			continue
		}
		out = append(out, r)
	}
	return Reals(out)
}

func (rs Reals) index(k RealKey) (int, bool) {
	return slices.BinarySearchFunc(rs, k, func(r RealServer, k RealKey) int { return r.RealKey.compare(k) })
}

// Get returns the real server with key k.
func (rs Reals) Get(k RealKey) (RealServer, bool) {
	if i, ok := rs.index(k); ok {
		return rs[i], true
	}
	return RealServer{}, false
}

// changed returns the real servers after ops, the operations on rs's
// virtual server (AddReals, UpdateReal, DeleteReal), in one pass. It never
// changes rs: a Reals, once made, is shared by the desired state, the
// programmed state and the plans between them, and only replaced.
func (rs Reals) changed(ops ...Op) Reals {
	if len(rs) == 0 && len(ops) == 1 {
		if o, ok := ops[0].(AddReals); ok {
			return o.Reals
		}
	}
	out := slices.Clone(rs)
	for _, op := range ops {
		switch o := op.(type) {
		case AddReals:
			out = mergeReals(out, o.Reals)
		case UpdateReal:
			if i, ok := out.index(o.Real.RealKey); ok {
				out[i].Weight = o.Real.Weight
			}
		case DeleteReal:
			if i, ok := out.index(o.Real); ok {
				out = slices.Delete(out, i, i+1)
			}
		}
	}
	return out
}

// mergeReals returns the sorted union of a and b, b's real server where
// both have one.
func mergeReals(a, b Reals) Reals {
	out := make(Reals, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch c := a[0].RealKey.compare(b[0].RealKey); {
		case c < 0:
			out, a = append(out, a[0]), a[1:]
		case c > 0:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, b[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}
