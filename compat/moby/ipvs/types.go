package ipvs

import (
	"net"
	"time"
)

// Service is an IPVS virtual service in moby/ipvs's shape: raw kernel
// numbers where package ipvs has typed values.
type Service struct {
	// Address, Protocol (an IPPROTO_* number) and Port identify the
	// service unless FWMark is set. A nil Address is the family's
	// unspecified address, as moby/ipvs sent it.
	Address  net.IP
	Protocol uint16
	Port     uint16
	// FWMark, when not zero, identifies the service instead: it takes the
	// packets carrying that firewall mark.
	FWMark uint32

	// SchedName is the scheduler: RoundRobin, SourceHashing, or any other
	// the kernel has a module for.
	SchedName string
	// Flags are IP_VS_SVC_F_* bits; on read the kernel adds
	// IP_VS_SVC_F_HASHED (0x2).
	Flags uint32
	// Timeout is the persistence timeout in seconds.
	Timeout uint32
	// Netmask groups clients for persistence, as the kernel's attribute
	// reads as a host integer: for IPv4 the mask in network byte order
	// (0xffffffff for a single address), for IPv6 the prefix length (128).
	Netmask uint32
	// AddressFamily is syscall.AF_INET or syscall.AF_INET6.
	AddressFamily uint16
	// PEName names a persistence engine, such as "sip".
	PEName string
	Stats  SvcStats
}

// SvcStats are a service's counters as moby/ipvs reported them: the
// connection and packet counters and the rates hold the low 32 bits of the
// kernel's 64-bit values (what the kernel's 32-bit attribute carries too).
// Handle.Conn reads the full values.
type SvcStats struct {
	Connections uint32
	PacketsIn   uint32
	PacketsOut  uint32
	BytesIn     uint64
	BytesOut    uint64
	CPS         uint32
	BPSOut      uint32
	PPSIn       uint32
	PPSOut      uint32
	BPSIn       uint32
}

// Destination is a real server of a service in moby/ipvs's shape.
type Destination struct {
	Address net.IP
	Port    uint16
	// Weight is the share of new connections; 0 stops new connections to
	// the destination (it is drained).
	Weight int
	// ConnectionFlags' low bits (ConnectionFlagFwdMask) are the forwarding
	// method.
	ConnectionFlags uint32
	// AddressFamily is filled in on read and ignored on write, as
	// moby/ipvs ignored it: the family is the address's.
	AddressFamily  uint16
	UpperThreshold uint32
	LowerThreshold uint32
	// Filled in on read and ignored on write.
	ActiveConnections   int
	InactiveConnections int
	Stats               DstStats
}

// DstStats are a destination's counters, 32 bits wide as SvcStats.
type DstStats SvcStats

// Config holds the IPVS connection timeouts of the namespace. They are
// whole seconds: fractions are dropped, as moby/ipvs dropped them.
type Config struct {
	TimeoutTCP    time.Duration
	TimeoutTCPFin time.Duration
	TimeoutUDP    time.Duration
}

// Forwarding methods of a destination: the bits of
// Destination.ConnectionFlags under ConnectionFlagFwdMask.
const (
	ConnectionFlagFwdMask     = 0x0007
	ConnectionFlagMasq        = 0x0000
	ConnectionFlagLocalNode   = 0x0001
	ConnectionFlagTunnel      = 0x0002
	ConnectionFlagDirectRoute = 0x0003
)

// The same forwarding methods under moby/ipvs's other names, with the
// cache bypass the kernel uses internally.
const (
	ConnFwdMask        = 0x0007
	ConnFwdMasq        = 0x0000
	ConnFwdLocalNode   = 0x0001
	ConnFwdTunnel      = 0x0002
	ConnFwdDirectRoute = 0x0003
	ConnFwdBypass      = 0x0004
)

// Scheduler names moby/ipvs declared; package ipvs's Scheduler constants
// name the rest.
const (
	RoundRobin              = "rr"
	LeastConnection         = "lc"
	DestinationHashing      = "dh"
	SourceHashing           = "sh"
	WeightedRoundRobin      = "wrr"
	WeightedLeastConnection = "wlc"
)
