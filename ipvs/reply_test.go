package ipvs

import (
	"encoding/binary"
	"math"
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// The kernel's side of the encoding, as ip_vs_genl_fill_service,
// ip_vs_genl_fill_dest and ip_vs_genl_fill_stats write it: the decoding
// tests and fuzz targets use them for round trips, and TestDumpBusy for
// its scripted dump. (ipvstest has its own copy, apart from this package.)

func encodeStatsReply(ae *netlink.AttributeEncoder, s Stats, wide bool) {
	u := func(typ uint16, v uint64) {
		if wide {
			ae.Uint64(typ, v)
		} else {
			ae.Uint32(typ, uint32(v))
		}
	}
	u(statsAttrConns, s.Connections)
	u(statsAttrInPkts, s.PacketsIn)
	u(statsAttrOutPkts, s.PacketsOut)
	ae.Uint64(statsAttrInBytes, s.BytesIn)
	ae.Uint64(statsAttrOutBytes, s.BytesOut)
	u(statsAttrCPS, s.CPS)
	u(statsAttrInPPS, s.PacketsInPS)
	u(statsAttrOutPPS, s.PacketsOutPS)
	u(statsAttrInBPS, s.BytesInPS)
	u(statsAttrOutBPS, s.BytesOutPS)
}

func encodeStatsBoth(ae *netlink.AttributeEncoder, statsTyp, stats64Typ uint16, s Stats) {
	ae.Nested(statsTyp, func(nae *netlink.AttributeEncoder) error {
		encodeStatsReply(nae, s, false)
		return nil
	})
	ae.Nested(stats64Typ, func(nae *netlink.AttributeEncoder) error {
		encodeStatsReply(nae, s, true)
		return nil
	})
}

// encodeServiceReply writes every field of s that holds something, so
// decoding gives s back.
func encodeServiceReply(s Service) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Uint16(svcAttrAF, uint16(s.Family))
	if s.FirewallMark != 0 {
		ae.Uint32(svcAttrFwmark, s.FirewallMark)
	}
	if s.Protocol != 0 {
		ae.Uint16(svcAttrProtocol, uint16(s.Protocol))
	}
	if s.Addr.IsValid() {
		aeAddr(ae, svcAttrAddr, s.Addr)
	}
	aePort(ae, svcAttrPort, s.Port)
	ae.String(svcAttrSchedName, string(s.Scheduler))
	if s.PersistenceEngine != "" {
		ae.String(svcAttrPEName, s.PersistenceEngine)
	}
	flags := binary.NativeEndian.AppendUint32(nil, uint32(s.Flags))
	ae.Bytes(svcAttrFlags, binary.NativeEndian.AppendUint32(flags, math.MaxUint32))
	ae.Uint32(svcAttrTimeout, uint32(s.Timeout/time.Second))
	if s.Family == inet.IPv6 {
		ae.Uint32(svcAttrNetmask, uint32(s.Netmask))
	} else {
		ae.Bytes(svcAttrNetmask, binary.BigEndian.AppendUint32(nil, uint32(uint64(math.MaxUint32)<<(32-s.Netmask))))
	}
	encodeStatsBoth(ae, svcAttrStats, svcAttrStats64, s.Stats)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func encodeDestinationReply(d Destination) []byte {
	ae := netlink.NewAttributeEncoder()
	aeAddr(ae, destAttrAddr, d.Addr)
	aePort(ae, destAttrPort, d.Port)
	ae.Uint32(destAttrFwdMethod, uint32(d.Forward))
	if d.Weight != 0 || d.Drained {
		ae.Uint32(destAttrWeight, d.kernelWeight())
	}
	ae.Uint8(destAttrTunType, uint8(d.TunnelType))
	aePort(ae, destAttrTunPort, d.TunnelPort)
	ae.Uint16(destAttrTunFlags, uint16(d.TunnelFlags))
	ae.Uint32(destAttrUThresh, d.UpperThreshold)
	ae.Uint32(destAttrLThresh, d.LowerThreshold)
	ae.Uint32(destAttrActiveConns, d.ActiveConnections)
	ae.Uint32(destAttrInactConns, d.InactiveConnections)
	ae.Uint32(destAttrPersistConns, d.PersistentConnections)
	ae.Uint16(destAttrAddrFamily, uint16(d.family()))
	encodeStatsBoth(ae, destAttrStats, destAttrStats64, d.Stats)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func encodeInfoReply(i Info) []byte {
	ae := netlink.NewAttributeEncoder()
	v := uint32(i.Version.Major)<<16 | uint32(i.Version.Minor)<<8 | uint32(i.Version.Patch)
	ae.Uint32(infoAttrVersion, v)
	ae.Uint32(infoAttrConnTabSize, i.ConnTableSize)
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

// wrap nests attributes under a first-level attribute, as the replies
// carrying a service or destination do.
func wrap(typ uint16, inner []byte) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(typ, func(nae *netlink.AttributeEncoder) error {
		attrs, err := netlink.UnmarshalAttributes(inner)
		if err != nil {
			return err
		}
		for _, a := range attrs {
			nae.Bytes(a.Type, a.Data)
		}
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

func aeAddr(ae *netlink.AttributeEncoder, typ uint16, a netip.Addr) {
	var w nl.Writer
	writeAddr(&w, typ, a)
	ae.Bytes(typ, w.B[4:])
}

func aePort(ae *netlink.AttributeEncoder, typ uint16, p uint16) {
	ae.Bytes(typ, binary.BigEndian.AppendUint16(nil, p))
}

func encodeTimeoutsReply(t Timeouts) []byte {
	var w nl.Writer
	t.encode(&w)
	return w.B
}
