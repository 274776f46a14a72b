package ipvs

import (
	"errors"
	"fmt"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"math"
	"net/netip"
)

// Destination is a real server behind a service, identified within it by
// (Addr, Port).
type Destination struct {
	// Addr may be of another family than the service's only with Tunnel
	// forwarding.
	Addr netip.Addr
	Port uint16

	Forward ForwardMethod
	// Weight is the share of new connections. Zero means 1, as ipvsadm
	// has it: a destination is drained (weight 0 in the kernel, no new
	// connections) only when Drained says so.
	Weight int
	// Drained stops new connections to the destination, which keeps its
	// established ones; Weight must then be zero. A destination read from
	// the kernel is Drained when its weight is 0.
	Drained bool
	// UpperThreshold and LowerThreshold bound active connections: above
	// the upper the destination gets no new ones until it is below the
	// lower. Zero means no limit.
	UpperThreshold uint32
	LowerThreshold uint32

	// Tunnel settings, for Forward == Tunnel (Linux 5.2 and later).
	TunnelType  TunnelType
	TunnelPort  uint16 // for GUE
	TunnelFlags TunnelFlags

	// Filled in by the kernel on read and ignored on write.
	ActiveConnections     uint32
	InactiveConnections   uint32
	PersistentConnections uint32
	Stats                 Stats
}

func (d Destination) family() inet.Family {
	if d.Addr.Is4() {
		return inet.IPv4
	}
	return inet.IPv6
}

// String names the destination as "10.1.0.5:8080" or "[2001:db8::5]:80".
func (d Destination) String() string {
	return netip.AddrPortFrom(d.Addr, d.Port).String()
}

func (d Destination) validateKey() error {
	if !d.Addr.IsValid() {
		return errors.New("destination needs an address")
	}
	if d.Addr.Zone() != "" {
		return fmt.Errorf("address %v has a zone", d.Addr)
	}
	return nil
}

func (d Destination) validate() error {
	if err := d.validateKey(); err != nil {
		return err
	}
	if d.Weight < 0 || d.Weight > math.MaxInt32 {
		return fmt.Errorf("weight %d out of range", d.Weight)
	}
	if d.Drained && d.Weight != 0 {
		return fmt.Errorf("weight %d on a drained destination", d.Weight)
	}
	switch d.Forward {
	case Masquerade, Tunnel, Route:
	default:
		return fmt.Errorf("forwarding method %v cannot be set", d.Forward)
	}
	return nil
}

// kernelWeight is the weight the kernel gets: 0 for a drained
// destination, 1 for an unset one.
func (d Destination) kernelWeight() uint32 {
	switch {
	case d.Drained:
		return 0
	case d.Weight == 0:
		return 1
	}
	return uint32(d.Weight)
}

// encode writes the destination's nested attributes: its key, and with
// full its settings too, in the order ipvsadm's libipvs uses. Kernels
// before 5.2 ignore the tunnel attributes.
func (d Destination) encode(w *nl.Writer, full bool) {
	w.Uint16(destAttrAddrFamily, uint16(d.family()))
	writeAddr(w, destAttrAddr, d.Addr)
	w.BE16(destAttrPort, d.Port)
	if !full {
		return
	}
	w.Uint32(destAttrFwdMethod, uint32(d.Forward))
	w.Uint32(destAttrWeight, d.kernelWeight())
	w.Uint8(destAttrTunType, uint8(d.TunnelType))
	w.BE16(destAttrTunPort, d.TunnelPort)
	w.Uint16(destAttrTunFlags, uint16(d.TunnelFlags))
	w.Uint32(destAttrUThresh, d.UpperThreshold)
	w.Uint32(destAttrLThresh, d.LowerThreshold)
}

// decodeDestination reads the attributes nested in IPVS_CMD_ATTR_DEST. A
// destination reported without its own family (before Linux 3.18) has the
// service's, svcFamily.
func decodeDestination(b []byte, svcFamily inet.Family) (Destination, error) {
	var err error
	ad := nl.NewReader(b, "destination")
	var (
		d              Destination
		addr           []byte
		stats, stats64 []byte
		family         = svcFamily
	)
	for ad.Next() {
		switch ad.Type() {
		case destAttrAddr:
			addr = ad.Bytes()
		case destAttrPort:
			p, err := decodePort(ad.Bytes())
			if err != nil {
				ad.Fail("%v", err)
			}
			d.Port = p
		case destAttrAddrFamily:
			family = inet.Family(decodeByte(&ad, "address family"))
		case destAttrFwdMethod:
			d.Forward = ForwardMethod(ad.Uint32() & connFwdMask)
		case destAttrWeight:
			d.Weight = int(int32(ad.Uint32()))
			d.Drained = d.Weight == 0
		case destAttrUThresh:
			d.UpperThreshold = ad.Uint32()
		case destAttrLThresh:
			d.LowerThreshold = ad.Uint32()
		case destAttrTunType:
			d.TunnelType = TunnelType(ad.Uint8())
		case destAttrTunPort:
			p, err := decodePort(ad.Bytes())
			if err != nil {
				ad.Fail("%v", err)
			}
			d.TunnelPort = p
		case destAttrTunFlags:
			d.TunnelFlags = TunnelFlags(ad.Uint16())
		case destAttrActiveConns:
			d.ActiveConnections = ad.Uint32()
		case destAttrInactConns:
			d.InactiveConnections = ad.Uint32()
		case destAttrPersistConns:
			d.PersistentConnections = ad.Uint32()
		case destAttrStats:
			stats = ad.Bytes()
		case destAttrStats64:
			stats64 = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return Destination{}, err
	}
	if addr == nil {
		return Destination{}, errors.New("destination without an address")
	}
	if family != inet.IPv4 && family != inet.IPv6 {
		return Destination{}, fmt.Errorf("destination of unknown address family %v", family)
	}
	if d.Addr, err = decodeAddr(addr, family); err != nil {
		return Destination{}, fmt.Errorf("destination: %w", err)
	}
	if stats64 == nil {
		stats64 = stats
	}
	if stats64 != nil {
		if d.Stats, err = decodeStats(stats64); err != nil {
			return Destination{}, fmt.Errorf("destination %v: %w", d, err)
		}
	}
	return d, nil
}
