package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// ToService converts s to package ipvs's Service, as a Handle sends it:
// to put moby-shaped services in an ipvs.Batch, or to read their 64-bit
// counters with Handle.Conn. It fails on values package ipvs cannot
// express: an unknown address family (unix.EAFNOSUPPORT, the kernel's
// answer), an address that is not an IP address, an IPv4 netmask that is
// not a prefix.
func ToService(s *Service) (ipvs.Service, error) {
	if s == nil {
		return ipvs.Service{}, errors.New("nil service")
	}
	var out ipvs.Service
	switch s.AddressFamily {
	case uapi.AF_INET:
		out.Family = inet.IPv4
	case uapi.AF_INET6:
		out.Family = inet.IPv6
	default:
		return ipvs.Service{}, fmt.Errorf("address family %d: %w", s.AddressFamily, unix.EAFNOSUPPORT)
	}
	if s.FWMark != 0 {
		out.FirewallMark = s.FWMark
	} else {
		if s.Protocol > 0xff {
			return ipvs.Service{}, fmt.Errorf("protocol %d out of range", s.Protocol)
		}
		addr, err := serviceAddr(s.Address, out.Family)
		if err != nil {
			return ipvs.Service{}, err
		}
		out.Protocol, out.Addr, out.Port = inet.Protocol(s.Protocol), addr, s.Port
	}
	netmask, err := prefixLen(out.Family, s.Netmask)
	if err != nil {
		return ipvs.Service{}, err
	}
	out.Scheduler = ipvs.Scheduler(s.SchedName)
	out.Flags = ipvs.ServiceFlags(s.Flags)
	out.Timeout = time.Duration(s.Timeout) * time.Second
	out.Netmask = netmask
	out.PersistenceEngine = s.PEName
	return out, nil
}

// serviceAddr converts a service's address. A nil one is the unspecified
// address, which is what the kernel made of moby/ipvs's empty attribute.
func serviceAddr(ip net.IP, f inet.Family) (netip.Addr, error) {
	if len(ip) == 0 {
		if f == inet.IPv6 {
			return netip.IPv6Unspecified(), nil
		}
		return netip.IPv4Unspecified(), nil
	}
	return addrFromIP(ip)
}

// addrFromIP converts an address, IPv4 in either of net.IP's forms.
func addrFromIP(ip net.IP) (netip.Addr, error) {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4)), nil
	}
	if len(ip) == net.IPv6len {
		return netip.AddrFrom16([16]byte(ip)), nil
	}
	return netip.Addr{}, fmt.Errorf("address %v of %d bytes", ip, len(ip))
}

// prefixLen converts moby/ipvs's raw netmask to package ipvs's prefix
// length. moby/ipvs wrote the field as a host integer and the kernel reads
// an IPv4 mask from those bytes in network byte order.
func prefixLen(f inet.Family, raw uint32) (int, error) {
	if f == inet.IPv6 {
		if raw > 128 {
			return 0, fmt.Errorf("IPv6 netmask /%d out of range", raw)
		}
		return int(raw), nil
	}
	mask := binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, raw))
	ones := bits.LeadingZeros32(^mask)
	if mask != ^uint32(0)<<(32-ones) {
		return 0, fmt.Errorf("IPv4 netmask %v is not a prefix", net.IP(binary.BigEndian.AppendUint32(nil, mask)))
	}
	return ones, nil
}

// rawNetmask is prefixLen's inverse.
func rawNetmask(f inet.Family, ones int) uint32 {
	if f == inet.IPv6 {
		return uint32(ones)
	}
	mask := ^uint32(0) << (32 - ones)
	return binary.NativeEndian.Uint32(binary.BigEndian.AppendUint32(nil, mask))
}

// FromService converts a service package ipvs read into moby/ipvs's
// shape, as GetServices returns it.
func FromService(s ipvs.Service) *Service {
	out := &Service{
		Protocol:      uint16(s.Protocol),
		Port:          s.Port,
		FWMark:        s.FirewallMark,
		SchedName:     string(s.Scheduler),
		Flags:         uint32(s.Flags),
		Timeout:       uint32(s.Timeout / time.Second),
		Netmask:       rawNetmask(s.Family, s.Netmask),
		AddressFamily: uint16(s.Family),
		PEName:        s.PersistenceEngine,
		Stats:         stats32(s.Stats),
	}
	if s.Addr.IsValid() {
		out.Address = net.IP(s.Addr.AsSlice())
	}
	return out
}

// ToDestination converts d to package ipvs's Destination, as a Handle
// sends it. A zero Weight is a drained destination. ConnectionFlagLocalNode,
// which the kernel reports for a local address, is sent as masquerading,
// from which the kernel makes it again, so a destination read back can be
// passed back. It fails on an address that is not an IP address.
func ToDestination(d *Destination) (ipvs.Destination, error) {
	if d == nil {
		return ipvs.Destination{}, errors.New("nil destination")
	}
	addr, err := addrFromIP(d.Address)
	if err != nil {
		return ipvs.Destination{}, err
	}
	fwd := ipvs.ForwardMethod(d.ConnectionFlags & ConnectionFlagFwdMask)
	if fwd == ipvs.LocalNode {
		fwd = ipvs.Masquerade
	}
	return ipvs.Destination{
		Addr:           addr,
		Port:           d.Port,
		Forward:        fwd,
		Weight:         d.Weight,
		Drained:        d.Weight == 0,
		UpperThreshold: d.UpperThreshold,
		LowerThreshold: d.LowerThreshold,
	}, nil
}

// FromDestination converts a destination package ipvs read into
// moby/ipvs's shape, as GetDestinations returns it.
func FromDestination(d ipvs.Destination) *Destination {
	family := uint16(uapi.AF_INET6)
	if d.Addr.Is4() {
		family = uapi.AF_INET
	}
	return &Destination{
		Address:             net.IP(d.Addr.AsSlice()),
		Port:                d.Port,
		Weight:              d.Weight,
		ConnectionFlags:     uint32(d.Forward),
		AddressFamily:       family,
		UpperThreshold:      d.UpperThreshold,
		LowerThreshold:      d.LowerThreshold,
		ActiveConnections:   int(d.ActiveConnections),
		InactiveConnections: int(d.InactiveConnections),
		Stats:               DstStats(stats32(d.Stats)),
	}
}

// stats32 clips the counters to moby/ipvs's widths, as the kernel clips
// them into its 32-bit attribute.
func stats32(s ipvs.Stats) SvcStats {
	return SvcStats{
		Connections: uint32(s.Connections),
		PacketsIn:   uint32(s.PacketsIn),
		PacketsOut:  uint32(s.PacketsOut),
		BytesIn:     s.BytesIn,
		BytesOut:    s.BytesOut,
		CPS:         uint32(s.CPS),
		BPSOut:      uint32(s.BytesOutPS),
		PPSIn:       uint32(s.PacketsInPS),
		PPSOut:      uint32(s.PacketsOutPS),
		BPSIn:       uint32(s.BytesInPS),
	}
}
