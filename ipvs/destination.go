package ipvs

import (
	"errors"
	"fmt"
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
	// Weight is the share of new connections; 0 stops new ones (drain).
	Weight int
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

func (d Destination) family() Family {
	if d.Addr.Is4() {
		return IPv4
	}
	return IPv6
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
	switch d.Forward {
	case Masquerade, Tunnel, Route:
	default:
		return fmt.Errorf("forwarding method %v cannot be set", d.Forward)
	}
	return nil
}

// encode writes the destination's nested attributes: its key, and with
// full its settings too, in the order ipvsadm's libipvs uses. Kernels
// before 5.2 ignore the tunnel attributes.
func (d Destination) encode(w *attrWriter, full bool) {
	w.u16(destAttrAddrFamily, uint16(d.family()))
	w.addr(destAttrAddr, d.Addr)
	w.be16(destAttrPort, d.Port)
	if !full {
		return
	}
	w.u32(destAttrFwdMethod, uint32(d.Forward))
	w.u32(destAttrWeight, uint32(d.Weight))
	w.u8(destAttrTunType, uint8(d.TunnelType))
	w.be16(destAttrTunPort, d.TunnelPort)
	w.u16(destAttrTunFlags, uint16(d.TunnelFlags))
	w.u32(destAttrUThresh, d.UpperThreshold)
	w.u32(destAttrLThresh, d.LowerThreshold)
}

// decodeDestination reads the attributes nested in IPVS_CMD_ATTR_DEST. A
// destination reported without its own family (before Linux 3.18) has the
// service's, svcFamily.
func decodeDestination(b []byte, svcFamily Family) (Destination, error) {
	var err error
	ad := newAttrDecoder(b, "destination")
	var (
		d              Destination
		addr           []byte
		stats, stats64 []byte
		family         = svcFamily
	)
	for ad.Next() {
		switch ad.Type() {
		case destAttrAddr:
			addr = ad.raw()
		case destAttrPort:
			p, err := decodePort(ad.raw())
			if err != nil {
				ad.fail("%v", err)
			}
			d.Port = p
		case destAttrAddrFamily:
			family = Family(ad.u16())
		case destAttrFwdMethod:
			d.Forward = ForwardMethod(ad.u32() & connFwdMask)
		case destAttrWeight:
			d.Weight = int(int32(ad.u32()))
		case destAttrUThresh:
			d.UpperThreshold = ad.u32()
		case destAttrLThresh:
			d.LowerThreshold = ad.u32()
		case destAttrTunType:
			d.TunnelType = TunnelType(ad.u8())
		case destAttrTunPort:
			p, err := decodePort(ad.raw())
			if err != nil {
				ad.fail("%v", err)
			}
			d.TunnelPort = p
		case destAttrTunFlags:
			d.TunnelFlags = TunnelFlags(ad.u16())
		case destAttrActiveConns:
			d.ActiveConnections = ad.u32()
		case destAttrInactConns:
			d.InactiveConnections = ad.u32()
		case destAttrPersistConns:
			d.PersistentConnections = ad.u32()
		case destAttrStats:
			stats = ad.raw()
		case destAttrStats64:
			stats64 = ad.raw()
		}
	}
	if err := ad.finish(); err != nil {
		return Destination{}, err
	}
	if addr == nil {
		return Destination{}, errors.New("destination without an address")
	}
	if family != IPv4 && family != IPv6 {
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
