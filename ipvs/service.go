package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Scheduler names an IPVS scheduling algorithm: the kernel module
// ip_vs_<name> that implements it.
type Scheduler string

// The kernel's schedulers (net/netfilter/ipvs/ip_vs_*.c).
const (
	RoundRobin                              Scheduler = "rr"
	WeightedRoundRobin                      Scheduler = "wrr"
	LeastConnection                         Scheduler = "lc"
	WeightedLeastConnection                 Scheduler = "wlc"
	LocalityBasedLeastConnection            Scheduler = "lblc"
	LocalityBasedLeastConnectionReplication Scheduler = "lblcr"
	DestinationHashing                      Scheduler = "dh"
	SourceHashing                           Scheduler = "sh"
	ShortestExpectedDelay                   Scheduler = "sed"
	NeverQueue                              Scheduler = "nq"
	WeightedFailover                        Scheduler = "fo"
	WeightedOverflow                        Scheduler = "ovf"
	MaglevHashing                           Scheduler = "mh"
	TwoRandomChoices                        Scheduler = "twos"
)

// DefaultScheduler is used when a Service names none, as ipvsadm does.
const DefaultScheduler = WeightedLeastConnection

// Service is an IPVS virtual service. It is identified either by
// (Protocol, Addr, Port) or, when FirewallMark is not zero, by
// (Family, FirewallMark).
type Service struct {
	// Family is the address family. It may be left zero when Addr is set;
	// a firewall-mark service needs it.
	Family   inet.Family
	Protocol inet.Protocol
	Addr     netip.Addr
	Port     uint16
	// FirewallMark, when not zero, makes this a service for packets
	// carrying that mark, whatever their address, port and protocol.
	FirewallMark uint32

	// Scheduler is the scheduling algorithm, one of the Scheduler
	// constants or another the kernel has a module for. Empty means
	// DefaultScheduler.
	Scheduler Scheduler
	Flags     ServiceFlags
	// Timeout is how long a persistent client sticks to its destination,
	// in whole seconds.
	Timeout time.Duration
	// Netmask is the prefix length that groups clients for persistence:
	// clients in the same /Netmask stick together. Zero means a single
	// address (32 or 128), ipvsadm's default.
	Netmask int
	// PersistenceEngine names a persistence engine, such as "sip".
	PersistenceEngine string

	// Stats are filled in by the kernel on read and ignored on write.
	Stats Stats
}

// family returns the service's address family, from Addr when Family is
// not set.
func (s Service) family() inet.Family {
	if s.Family != 0 || !s.Addr.IsValid() {
		return s.Family
	}
	if s.Addr.Is4() {
		return inet.IPv4
	}
	return inet.IPv6
}

// String names the service as ipvsadm does: "TCP 10.0.0.1:80",
// "UDP [2001:db8::1]:53" (inet.VirtualServer), "FWM 7 IPv6".
func (s Service) String() string {
	if s.FirewallMark != 0 {
		return fmt.Sprintf("FWM %d %v", s.FirewallMark, s.family())
	}
	return inet.VirtualServer(s.Protocol, s.Addr, s.Port)
}

// validateKey checks the fields that identify the service.
func (s Service) validateKey() error {
	f := s.family()
	if f != inet.IPv4 && f != inet.IPv6 {
		return errors.New("service needs an address family (set Addr or Family)")
	}
	if s.FirewallMark != 0 {
		return nil
	}
	if !s.Addr.IsValid() {
		return errors.New("service needs an address or a firewall mark")
	}
	if s.Addr.Is4() != (f == inet.IPv4) {
		return fmt.Errorf("address %v is not %v", s.Addr, f)
	}
	if s.Addr.Zone() != "" {
		return fmt.Errorf("address %v has a zone", s.Addr)
	}
	switch s.Protocol {
	case inet.TCP, inet.UDP, inet.SCTP:
	default:
		return fmt.Errorf("unsupported protocol %v", s.Protocol)
	}
	return nil
}

// validate checks a service about to be created or updated.
func (s Service) validate() error {
	if err := s.validateKey(); err != nil {
		return err
	}
	if len(s.Scheduler) >= schedNameMaxLen {
		return fmt.Errorf("scheduler name %q longer than %d bytes", s.Scheduler, schedNameMaxLen-1)
	}
	if len(s.PersistenceEngine) >= peNameMaxLen {
		return fmt.Errorf("persistence engine name %q longer than %d bytes", s.PersistenceEngine, peNameMaxLen-1)
	}
	if s.Timeout < 0 || s.Timeout/time.Second > math.MaxUint32 || s.Timeout%time.Second != 0 {
		return fmt.Errorf("persistence timeout %v is not a whole number of seconds in range", s.Timeout)
	}
	if s.Netmask < 0 || s.Netmask > s.family().Bits() {
		return fmt.Errorf("persistence netmask /%d out of range for %v", s.Netmask, s.family())
	}
	return nil
}

// encode writes the service's nested attributes: its key, and with full
// its settings too, in the order ipvsadm's libipvs uses.
func (s Service) encode(w *nl.Writer, full bool) {
	f := s.family()
	w.Uint16(svcAttrAF, uint16(f))
	if s.FirewallMark != 0 {
		w.Uint32(svcAttrFwmark, s.FirewallMark)
	} else {
		w.Uint16(svcAttrProtocol, uint16(s.Protocol))
		writeAddr(w, svcAttrAddr, s.Addr)
		w.BE16(svcAttrPort, s.Port)
	}
	if !full {
		return
	}
	sched := s.Scheduler
	if sched == "" {
		sched = DefaultScheduler
	}
	w.String(svcAttrSchedName, string(sched))
	if s.PersistenceEngine != "" {
		w.String(svcAttrPEName, s.PersistenceEngine)
	}
	// struct ip_vs_flags: the flags and a mask of those to change; all of
	// them, so an update sets exactly these flags.
	var flags [8]byte
	binary.NativeEndian.PutUint32(flags[:4], uint32(s.Flags))
	binary.NativeEndian.PutUint32(flags[4:], math.MaxUint32)
	w.Bytes(svcAttrFlags, flags[:])
	w.Uint32(svcAttrTimeout, uint32(s.Timeout/time.Second))
	w.Bytes(svcAttrNetmask, netmaskBytes(f, s.Netmask))
}

// netmaskBytes encodes the persistence netmask as the kernel reads it: for
// IPv4 a mask in network byte order, for IPv6 the prefix length as a host
// integer (ip_vs_ctl.c checks it against 1..128).
func netmaskBytes(f inet.Family, ones int) []byte {
	if ones == 0 {
		ones = f.Bits()
	}
	var b [4]byte
	if f == inet.IPv6 {
		binary.NativeEndian.PutUint32(b[:], uint32(ones))
	} else {
		binary.BigEndian.PutUint32(b[:], ^uint32(0)<<(32-ones))
	}
	return b[:]
}

// decodeNetmask is netmaskBytes' inverse. A non-contiguous IPv4 mask, which
// only the old setsockopt interface could set, reads as its leading ones.
func decodeNetmask(f inet.Family, b []byte) (int, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("netmask of %d bytes", len(b))
	}
	if f == inet.IPv6 {
		n := binary.NativeEndian.Uint32(b)
		if n > 128 {
			return 0, fmt.Errorf("IPv6 netmask /%d", n)
		}
		return int(n), nil
	}
	return bits.LeadingZeros32(^binary.BigEndian.Uint32(b)), nil
}

// decodeService reads the attributes nested in IPVS_CMD_ATTR_SERVICE.
func decodeService(b []byte) (Service, error) {
	var err error
	d := nl.NewReader(b, "service")
	var (
		s              Service
		addr, mask     []byte
		stats, stats64 []byte
		haveAF         bool
	)
	for d.Next() {
		switch d.Type() {
		case svcAttrAF:
			s.Family = inet.Family(decodeByte(&d, "address family"))
			haveAF = true
		case svcAttrProtocol:
			s.Protocol = inet.Protocol(decodeByte(&d, "protocol"))
		case svcAttrAddr:
			addr = d.Bytes()
		case svcAttrPort:
			p, err := decodePort(d.Bytes())
			if err != nil {
				d.Fail("%v", err)
			}
			s.Port = p
		case svcAttrFwmark:
			s.FirewallMark = d.Uint32()
		case svcAttrSchedName:
			s.Scheduler = Scheduler(d.String(schedNameMaxLen))
		case svcAttrPEName:
			s.PersistenceEngine = d.String(peNameMaxLen)
		case svcAttrFlags:
			b := d.Bytes()
			if len(b) != 8 {
				d.Fail("flags of %d bytes, want 8", len(b))
				continue
			}
			s.Flags = ServiceFlags(binary.NativeEndian.Uint32(b))
		case svcAttrTimeout:
			s.Timeout = time.Duration(d.Uint32()) * time.Second
		case svcAttrNetmask:
			mask = d.Bytes()
		case svcAttrStats:
			stats = d.Bytes()
		case svcAttrStats64:
			stats64 = d.Bytes()
		}
	}
	if err := d.Err(); err != nil {
		return Service{}, err
	}
	if !haveAF || (s.Family != inet.IPv4 && s.Family != inet.IPv6) {
		return Service{}, fmt.Errorf("service without a known address family (%v)", s.Family)
	}
	if addr != nil {
		if s.Addr, err = decodeAddr(addr, s.Family); err != nil {
			return Service{}, fmt.Errorf("service: %w", err)
		}
	}
	if mask != nil {
		if s.Netmask, err = decodeNetmask(s.Family, mask); err != nil {
			return Service{}, fmt.Errorf("service: %w", err)
		}
	}
	// STATS64 holds the same counters unclipped; STATS is for old kernels.
	if stats64 == nil {
		stats64 = stats
	}
	if stats64 != nil {
		if s.Stats, err = decodeStats(stats64); err != nil {
			return Service{}, fmt.Errorf("service %v: %w", s, err)
		}
	}
	return s, nil
}
