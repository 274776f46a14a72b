package ipvstest

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
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// The kernel's side of the wire, transcribed from include/uapi/linux/ip_vs.h
// and written here apart from package ipvs's encoder, so that a mistake
// there shows as a disagreement with the fake rather than cancelling out.

const genlVersion = 1

// Commands (IPVS_CMD_*).
const (
	cmdNewService = 1
	cmdSetService = 2
	cmdDelService = 3
	cmdGetService = 4
	cmdNewDest    = 5
	cmdSetDest    = 6
	cmdDelDest    = 7
	cmdGetDest    = 8
	cmdSetConfig  = 12
	cmdGetConfig  = 13
	cmdSetInfo    = 14
	cmdGetInfo    = 15
	cmdZero       = 16
	cmdFlush      = 17
)

// First-level attributes (IPVS_CMD_ATTR_*).
const (
	cmdAttrService       = 1
	cmdAttrDest          = 2
	cmdAttrTimeoutTCP    = 4
	cmdAttrTimeoutTCPFin = 5
	cmdAttrTimeoutUDP    = 6
)

// Service attributes (IPVS_SVC_ATTR_*).
const (
	svcAttrAF        = 1
	svcAttrProtocol  = 2
	svcAttrAddr      = 3
	svcAttrPort      = 4
	svcAttrFwmark    = 5
	svcAttrSchedName = 6
	svcAttrFlags     = 7
	svcAttrTimeout   = 8
	svcAttrNetmask   = 9
	svcAttrStats     = 10
	svcAttrPEName    = 11
	svcAttrStats64   = 12
)

// Destination attributes (IPVS_DEST_ATTR_*).
const (
	destAttrAddr         = 1
	destAttrPort         = 2
	destAttrFwdMethod    = 3
	destAttrWeight       = 4
	destAttrUThresh      = 5
	destAttrLThresh      = 6
	destAttrActiveConns  = 7
	destAttrInactConns   = 8
	destAttrPersistConns = 9
	destAttrStats        = 10
	destAttrAddrFamily   = 11
	destAttrStats64      = 12
	destAttrTunType      = 13
	destAttrTunPort      = 14
	destAttrTunFlags     = 15
)

// Info attributes (IPVS_INFO_ATTR_*).
const (
	infoAttrVersion     = 1
	infoAttrConnTabSize = 2
)

// connFwdMask picks the forwarding method out of IP_VS_CONN_F_*.
const connFwdMask = 0x7

// request is what one IPVS command carries.
type request struct {
	svc      *ipvs.Service
	dest     *ipvs.Destination
	timeouts ipvs.Timeouts
}

// parseRequest reads a command's attributes as ip_vs_genl_parse_service
// and ip_vs_genl_parse_dest do; a malformed one is the kernel's EINVAL.
func parseRequest(b []byte) (request, error) {
	var r request
	ad := nl.NewReader(b, "request")
	for ad.Next() {
		switch ad.Type() {
		case cmdAttrService:
			s, err := parseService(ad.Bytes())
			if err != nil {
				return r, err
			}
			r.svc = &s
		case cmdAttrDest:
			d, err := parseDest(ad.Bytes())
			if err != nil {
				return r, err
			}
			r.dest = &d
		case cmdAttrTimeoutTCP:
			r.timeouts.TCP = time.Duration(ad.Uint32()) * time.Second
		case cmdAttrTimeoutTCPFin:
			r.timeouts.TCPFin = time.Duration(ad.Uint32()) * time.Second
		case cmdAttrTimeoutUDP:
			r.timeouts.UDP = time.Duration(ad.Uint32()) * time.Second
		}
	}
	return r, ad.Err()
}

// parseService reads a service nest. The kernel needs the family and
// either a firewall mark or protocol, address and port.
func parseService(b []byte) (ipvs.Service, error) {
	var (
		s          ipvs.Service
		addr, mask []byte
		err        error
	)
	ad := nl.NewReader(b, "service")
	for ad.Next() {
		switch ad.Type() {
		case svcAttrAF:
			s.Family = inet.Family(min(ad.Uint16(), 0xff)) // wider values are unknown families, as 0xff is
		case svcAttrProtocol:
			s.Protocol = inet.Protocol(min(ad.Uint16(), 0xff)) // IPPROTO_RAW stands for any wider value: all unsupported
		case svcAttrAddr:
			addr = ad.Bytes()
		case svcAttrPort:
			s.Port = bigEndian16(ad.Bytes())
		case svcAttrFwmark:
			s.FirewallMark = ad.Uint32()
		case svcAttrSchedName:
			s.Scheduler = ipvs.Scheduler(ad.String(0))
		case svcAttrPEName:
			s.PersistenceEngine = ad.String(0)
		case svcAttrFlags:
			s.Flags = parseFlags(ad.Bytes())
		case svcAttrTimeout:
			s.Timeout = time.Duration(ad.Uint32()) * time.Second
		case svcAttrNetmask:
			mask = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return s, err
	}
	if s.Family != inet.IPv4 && s.Family != inet.IPv6 {
		return s, fmt.Errorf("service of address family %d", s.Family)
	}
	if s.FirewallMark != 0 {
		s.Protocol, s.Port = 0, 0
		return s, parseNetmask(&s, mask)
	}
	if s.Addr, err = parseAddr(addr, s.Family); err != nil {
		return s, err
	}
	return s, parseNetmask(&s, mask)
}

// parseFlags reads struct ip_vs_flags; only the flags under the mask are
// given, and package ipvs always sends a full mask.
func parseFlags(b []byte) ipvs.ServiceFlags {
	if len(b) != 8 {
		return 0
	}
	return ipvs.ServiceFlags(binary.NativeEndian.Uint32(b[:4]) & binary.NativeEndian.Uint32(b[4:]))
}

// parseNetmask reads the persistence netmask: for IPv4 a mask in network
// byte order, for IPv6 a prefix length.
func parseNetmask(s *ipvs.Service, b []byte) error {
	if b == nil {
		return nil
	}
	if len(b) != 4 {
		return fmt.Errorf("netmask of %d bytes", len(b))
	}
	if s.Family == inet.IPv6 {
		n := binary.NativeEndian.Uint32(b)
		if n < 1 || n > 128 {
			return fmt.Errorf("IPv6 netmask /%d", n)
		}
		s.Netmask = int(n)
		return nil
	}
	s.Netmask = bits.LeadingZeros32(^binary.BigEndian.Uint32(b))
	return nil
}

// parseDest reads a destination nest: its address family (the service's
// before Linux 3.18), address and port, and settings.
func parseDest(b []byte) (ipvs.Destination, error) {
	var (
		d    ipvs.Destination
		addr []byte
		af   inet.Family
		err  error
	)
	ad := nl.NewReader(b, "destination")
	for ad.Next() {
		switch ad.Type() {
		case destAttrAddrFamily:
			af = inet.Family(min(ad.Uint16(), 0xff)) // wider values are unknown families, as 0xff is
		case destAttrAddr:
			addr = ad.Bytes()
		case destAttrPort:
			d.Port = bigEndian16(ad.Bytes())
		case destAttrFwdMethod:
			d.Forward = ipvs.ForwardMethod(ad.Uint32() & connFwdMask)
		case destAttrWeight:
			d.Weight = int(int32(ad.Uint32()))
		case destAttrUThresh:
			d.UpperThreshold = ad.Uint32()
		case destAttrLThresh:
			d.LowerThreshold = ad.Uint32()
		case destAttrTunType:
			d.TunnelType = ipvs.TunnelType(ad.Uint8())
		case destAttrTunPort:
			d.TunnelPort = bigEndian16(ad.Bytes())
		case destAttrTunFlags:
			d.TunnelFlags = ipvs.TunnelFlags(ad.Uint16())
		}
	}
	if err := ad.Err(); err != nil {
		return d, err
	}
	d.Drained = d.Weight == 0
	d.Addr, err = parseAddr(addr, af)
	return d, err
}

// parseAddr reads a union nf_inet_addr of family f.
func parseAddr(b []byte, f inet.Family) (netip.Addr, error) {
	switch {
	case f == inet.IPv4 && len(b) >= 4:
		return netip.AddrFrom4([4]byte(b[:4])), nil
	case f == inet.IPv6 && len(b) >= 16:
		return netip.AddrFrom16([16]byte(b[:16])), nil
	case b == nil:
		return netip.Addr{}, errors.New("no address")
	}
	return netip.Addr{}, fmt.Errorf("address of %d bytes for family %d", len(b), f)
}

func bigEndian16(b []byte) uint16 {
	if len(b) != 2 {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// encodeService writes a service as ip_vs_genl_fill_service does.
func encodeService(w *nl.Writer, s ipvs.Service) {
	n := w.Begin(cmdAttrService | nl.Nested)
	w.Uint16(svcAttrAF, uint16(s.Family))
	if s.FirewallMark != 0 {
		w.Uint32(svcAttrFwmark, s.FirewallMark)
	} else {
		w.Uint16(svcAttrProtocol, uint16(s.Protocol))
		w.Bytes(svcAttrAddr, addrBytes(s.Addr))
		w.BE16(svcAttrPort, s.Port)
	}
	w.String(svcAttrSchedName, string(s.Scheduler))
	if s.PersistenceEngine != "" {
		w.String(svcAttrPEName, s.PersistenceEngine)
	}
	flags := binary.NativeEndian.AppendUint32(nil, uint32(s.Flags))
	w.Bytes(svcAttrFlags, binary.NativeEndian.AppendUint32(flags, math.MaxUint32))
	w.Uint32(svcAttrTimeout, uint32(s.Timeout/time.Second))
	w.Bytes(svcAttrNetmask, netmaskBytes(s))
	encodeStats(w, svcAttrStats, false)
	encodeStats(w, svcAttrStats64, true)
	w.End(n)
}

// netmaskBytes is parseNetmask's inverse.
func netmaskBytes(s ipvs.Service) []byte {
	if s.Family == inet.IPv6 {
		return binary.NativeEndian.AppendUint32(nil, uint32(s.Netmask))
	}
	return binary.BigEndian.AppendUint32(nil, uint32(uint64(math.MaxUint32)<<(32-s.Netmask)))
}

// encodeDest writes a destination as ip_vs_genl_fill_dest does.
func encodeDest(w *nl.Writer, d ipvs.Destination) {
	n := w.Begin(cmdAttrDest | nl.Nested)
	w.Bytes(destAttrAddr, addrBytes(d.Addr))
	w.BE16(destAttrPort, d.Port)
	w.Uint32(destAttrFwdMethod, uint32(d.Forward))
	w.Uint32(destAttrWeight, uint32(d.Weight))
	w.Uint8(destAttrTunType, uint8(d.TunnelType))
	w.BE16(destAttrTunPort, d.TunnelPort)
	w.Uint16(destAttrTunFlags, uint16(d.TunnelFlags))
	w.Uint32(destAttrUThresh, d.UpperThreshold)
	w.Uint32(destAttrLThresh, d.LowerThreshold)
	w.Uint32(destAttrActiveConns, d.ActiveConnections)
	w.Uint32(destAttrInactConns, d.InactiveConnections)
	w.Uint32(destAttrPersistConns, d.PersistentConnections)
	w.Uint16(destAttrAddrFamily, uint16(addrFamily(d.Addr)))
	encodeStats(w, destAttrStats, false)
	encodeStats(w, destAttrStats64, true)
	w.End(n)
}

// encodeStats writes counters that are all zero: the fake carries no
// traffic. In STATS the byte counters are u64 and the rest u32.
func encodeStats(w *nl.Writer, typ uint16, wide bool) {
	n := w.Begin(typ | nl.Nested)
	for a := uint16(1); a <= 10; a++ {
		if wide || a == 4 || a == 5 {
			w.Uint64(a, 0)
		} else {
			w.Uint32(a, 0)
		}
	}
	w.End(n)
}

func encodeTimeouts(w *nl.Writer, t ipvs.Timeouts) {
	w.Uint32(cmdAttrTimeoutTCP, uint32(t.TCP/time.Second))
	w.Uint32(cmdAttrTimeoutTCPFin, uint32(t.TCPFin/time.Second))
	w.Uint32(cmdAttrTimeoutUDP, uint32(t.UDP/time.Second))
}

func encodeInfo(w *nl.Writer, i ipvs.Info) {
	w.Uint32(infoAttrVersion, uint32(i.Version.Major)<<16|uint32(i.Version.Minor)<<8|uint32(i.Version.Patch))
	w.Uint32(infoAttrConnTabSize, i.ConnTableSize)
}

// addrBytes writes an address as a 16-byte union nf_inet_addr.
func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		v4 := a.As4()
		return append(v4[:], make([]byte, 12)...)
	}
	v6 := a.As16()
	return v6[:]
}

func addrFamily(a netip.Addr) inet.Family {
	if a.Is4() {
		return inet.IPv4
	}
	return inet.IPv6
}
