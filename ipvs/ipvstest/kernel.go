package ipvstest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/internal/seam"
	"golang.org/x/sys/unix"
)

// familyID is the generic netlink id the fake gives the IPVS family.
const familyID = 0x20

// Socket buffer sizes a Conn sees unless Options say otherwise: what a
// privileged Dial gets.
const (
	defaultReadBuffer  = 16 << 20
	defaultWriteBuffer = 8 << 20
)

// Options tune the fake; the zero value is a fresh kernel.
type Options struct {
	// DumpPart is how many services or destinations one datagram of a
	// dump carries; 0 means all of them. The kernel fills datagrams of
	// about 32 KiB: a small DumpPart makes a client read multi-part dumps.
	DumpPart int
	// ReadBuffer and WriteBuffer are the socket buffer sizes the Conns
	// see, which bound how a Conn cuts batches into writes; 0 means 16 MiB
	// and 8 MiB, as a privileged Dial gets.
	ReadBuffer, WriteBuffer int
	// Message is the extended-ack text of every error reply; the kernel
	// sends one for some errors only.
	Message string
}

// Kernel is the IPVS of one network namespace, in memory. Its methods
// are safe for concurrent use.
type Kernel struct {
	opts Options

	mu sync.Mutex
	// services are in the order they were created, as dumps list them;
	// byKey finds them as find does, in constant time (a program under
	// test may hold tens of thousands).
	services []*virtualServer
	byKey    map[serviceKey]*virtualServer
	timeouts ipvs.Timeouts
	writes   int
}

type virtualServer struct {
	svc   ipvs.Service
	dests []ipvs.Destination
}

// serviceKey is what the kernel looks a service up by: family and
// firewall mark, or family, protocol, address and port. A Service without
// its Family has its address's, as package ipvs sends it.
type serviceKey struct {
	family   inet.Family
	mark     uint32
	protocol inet.Protocol
	addr     netip.Addr
	port     uint16
}

func keyOf(s ipvs.Service) serviceKey {
	if s.FirewallMark != 0 {
		return serviceKey{family: s.Family, mark: s.FirewallMark}
	}
	family := s.Family
	if family == 0 {
		family = inet.FamilyOf(s.Addr)
	}
	return serviceKey{family: family, protocol: s.Protocol, addr: s.Addr, port: s.Port}
}

// New returns an empty kernel with the default timeouts (TCP 900s, TCP
// FIN 120s, UDP 300s). opts may be nil.
func New(opts *Options) *Kernel {
	k := &Kernel{byKey: map[serviceKey]*virtualServer{}, timeouts: ipvs.Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}}
	if opts != nil {
		k.opts = *opts
	}
	if k.opts.ReadBuffer == 0 {
		k.opts.ReadBuffer = defaultReadBuffer
	}
	if k.opts.WriteBuffer == 0 {
		k.opts.WriteBuffer = defaultWriteBuffer
	}
	return k
}

// Dial returns a real *ipvs.Conn whose socket reaches this kernel, as
// ipvs.Dial returns one on the host's. Conns of one Kernel share its
// state, as sockets in one namespace do.
func (k *Kernel) Dial() *ipvs.Conn {
	return seam.NewConn(&socket{k: k}, familyID, k.opts.ReadBuffer, k.opts.WriteBuffer).(*ipvs.Conn)
}

// Table returns the services, in the order they were created, with their
// destinations, as ipvs.Conn.Table reads them back.
func (k *Kernel) Table() []ipvs.VirtualServer {
	k.mu.Lock()
	defer k.mu.Unlock()
	table := make([]ipvs.VirtualServer, len(k.services))
	for i, vs := range k.services {
		table[i] = ipvs.VirtualServer{Service: vs.svc, Destinations: slices.Clone(vs.dests)}
	}
	return table
}

// Timeouts returns the connection timeouts.
func (k *Kernel) Timeouts() ipvs.Timeouts {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.timeouts
}

// Writes returns how many writes (sendmsg calls) the kernel has taken
// from its Conns, to check how a client batches.
func (k *Kernel) Writes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes
}

// SetConnections sets the connection counts of destination addr:port of
// service s as traffic through it would leave them: active connections
// (established TCP) and inactive ones (any other state). A destination
// keeps them when it is edited, drained or not, until they are set
// again, as the kernel keeps its connections until they end. It fails
// with ipvs.ErrServiceNotExist or ipvs.ErrDestinationNotExist when
// there is no such service or destination.
func (k *Kernel) SetConnections(s ipvs.Service, addr netip.Addr, port uint16, active, inactive uint32) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	vs := k.find(s)
	if vs == nil {
		return fmt.Errorf("ipvstest: service %v: %w", s, ipvs.ErrServiceNotExist)
	}
	j := slices.IndexFunc(vs.dests, func(x ipvs.Destination) bool { return x.Addr == addr && x.Port == port })
	if j < 0 {
		return fmt.Errorf("ipvstest: destination %v of %v: %w", netip.AddrPortFrom(addr, port), s, ipvs.ErrDestinationNotExist)
	}
	vs.dests[j].ActiveConnections, vs.dests[j].InactiveConnections = active, inactive
	return nil
}

// Dump prints the table much as ipvsadm -Ln does, one line per service
// and per destination, for test failures and golden comparisons:
//
//	TCP 10.96.0.10:80 rr
//	  -> 10.244.0.5:8080 masq 1
func (k *Kernel) Dump() string {
	var b strings.Builder
	for _, vs := range k.Table() {
		s := vs.Service
		fmt.Fprintf(&b, "%v %s", s, s.Scheduler)
		if s.Flags&ipvs.Persistent != 0 {
			fmt.Fprintf(&b, " persistent %d", int(s.Timeout/time.Second))
		}
		b.WriteString("\n")
		for _, d := range vs.Destinations {
			fmt.Fprintf(&b, "  -> %v %v %d\n", d, d.Forward, d.Weight)
		}
	}
	return b.String()
}

// loadable says whether a stock kernel can load the scheduler and the
// persistence engine; ip_vs_add_service fails with ENOENT otherwise.
func loadable(s ipvs.Service) bool {
	switch s.PersistenceEngine {
	case "", "sip":
	default:
		return false
	}
	switch s.Scheduler {
	case ipvs.RoundRobin, ipvs.WeightedRoundRobin, ipvs.LeastConnection, ipvs.WeightedLeastConnection,
		ipvs.LocalityBasedLeastConnection, ipvs.LocalityBasedLeastConnectionReplication,
		ipvs.DestinationHashing, ipvs.SourceHashing, ipvs.ShortestExpectedDelay, ipvs.NeverQueue,
		ipvs.WeightedFailover, ipvs.WeightedOverflow, ipvs.MaglevHashing, ipvs.TwoRandomChoices:
		return true
	}
	return false
}

// find returns the service with s's key, or nil, looked up as the
// kernel does: by family and firewall mark, or by family, protocol,
// address and port.
func (k *Kernel) find(s ipvs.Service) *virtualServer {
	return k.byKey[keyOf(s)]
}

// setService applies a change command to the table, as
// ip_vs_genl_set_cmd does, and returns its errno.
func (k *Kernel) setService(cmd uint8, r request) unix.Errno {
	switch cmd {
	case cmdFlush:
		k.services = nil
		clear(k.byKey)
		return 0
	case cmdSetConfig:
		k.setTimeouts(r.timeouts)
		return 0
	case cmdZero:
		if r.svc == nil {
			return 0
		}
	}
	if r.svc == nil {
		return unix.EINVAL
	}
	vs := k.find(*r.svc)
	if cmd == cmdNewService {
		return k.newService(vs, *r.svc)
	}
	if vs == nil {
		return unix.ESRCH
	}
	switch cmd {
	case cmdSetService:
		return k.editService(vs, *r.svc)
	case cmdDelService:
		delete(k.byKey, keyOf(vs.svc))
		k.services = slices.DeleteFunc(k.services, func(x *virtualServer) bool { return x == vs })
		return 0
	case cmdZero:
		return 0
	}
	if r.dest == nil {
		return unix.EINVAL
	}
	return setDest(vs, cmd, *r.dest)
}

// setTimeouts sets the timeouts given; the kernel leaves a zero alone.
func (k *Kernel) setTimeouts(t ipvs.Timeouts) {
	if t.TCP != 0 {
		k.timeouts.TCP = t.TCP
	}
	if t.TCPFin != 0 {
		k.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP != 0 {
		k.timeouts.UDP = t.UDP
	}
}

func (k *Kernel) newService(existing *virtualServer, s ipvs.Service) unix.Errno {
	if existing != nil {
		return unix.EEXIST
	}
	vs := &virtualServer{}
	if errno := k.editService(vs, s); errno != 0 {
		return errno
	}
	k.services = append(k.services, vs)
	k.byKey[keyOf(vs.svc)] = vs
	return 0
}

// editService sets a service's settings as ip_vs_add_service and
// ip_vs_edit_service do: the scheduler and persistence engine must load,
// and the kernel marks the service hashed.
func (k *Kernel) editService(vs *virtualServer, s ipvs.Service) unix.Errno {
	if !loadable(s) {
		return unix.ENOENT
	}
	s.Flags |= ipvs.Hashed
	vs.svc = s
	return 0
}

// setDest applies a destination command, as ip_vs_add_dest,
// ip_vs_edit_dest and ip_vs_del_dest do.
func setDest(vs *virtualServer, cmd uint8, d ipvs.Destination) unix.Errno {
	if cmd != cmdDelDest {
		if errno := checkDest(vs.svc, d); errno != 0 {
			return errno
		}
	}
	j := slices.IndexFunc(vs.dests, func(x ipvs.Destination) bool { return x.Addr == d.Addr && x.Port == d.Port })
	switch {
	case cmd == cmdNewDest && j >= 0:
		return unix.EEXIST
	case cmd == cmdNewDest:
		// A new destination has no connections; an edited one keeps its.
		d.ActiveConnections, d.InactiveConnections, d.PersistentConnections = 0, 0, 0
		vs.dests = append(vs.dests, d)
	case j < 0:
		return unix.ENOENT
	case cmd == cmdSetDest:
		old := vs.dests[j]
		d.ActiveConnections, d.InactiveConnections, d.PersistentConnections = old.ActiveConnections, old.InactiveConnections, old.PersistentConnections
		vs.dests[j] = d
	case cmd == cmdDelDest:
		vs.dests = slices.Delete(vs.dests, j, j+1)
	default:
		return unix.EOPNOTSUPP
	}
	return 0
}

// checkDest refuses what ip_vs_genl_set_cmd and ip_vs_add_dest refuse:
// a negative weight or inverted thresholds (ERANGE), and a destination
// of another family than its service's unless it is tunnelled (EINVAL).
func checkDest(s ipvs.Service, d ipvs.Destination) unix.Errno {
	if d.Weight < 0 || (d.UpperThreshold != 0 && d.LowerThreshold > d.UpperThreshold) {
		return unix.ERANGE
	}
	if addrFamily(d.Addr) != s.Family && d.Forward != ipvs.Tunnel {
		return unix.EINVAL
	}
	return 0
}
