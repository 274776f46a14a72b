package ipvs

import (
	"fmt"
	"strings"
)

// ServiceFlags are a service's flags (IP_VS_SVC_F_*).
type ServiceFlags uint32

// Service flags. The scheduler flags mean different things to different
// schedulers, so the sh and mh names share bits.
const (
	// Persistent makes a client stick to one destination for the service's
	// Timeout, across connections.
	Persistent ServiceFlags = 0x0001 // IP_VS_SVC_F_PERSISTENT
	// Hashed is set by the kernel on every service it holds; it is ignored
	// on write.
	Hashed ServiceFlags = 0x0002 // IP_VS_SVC_F_HASHED
	// OnePacket schedules each UDP datagram on its own.
	OnePacket ServiceFlags = 0x0004 // IP_VS_SVC_F_ONEPACKET
	// SHFallback makes the sh scheduler skip an unavailable destination.
	SHFallback ServiceFlags = 0x0008 // IP_VS_SVC_F_SCHED1
	// SHPort makes the sh scheduler hash the source port too.
	SHPort ServiceFlags = 0x0010 // IP_VS_SVC_F_SCHED2
	// MHFallback makes the mh scheduler skip an unavailable destination.
	MHFallback ServiceFlags = 0x0008 // IP_VS_SVC_F_SCHED1
	// MHPort makes the mh scheduler hash the source port too.
	MHPort ServiceFlags = 0x0010 // IP_VS_SVC_F_SCHED2
	// Sched3 is the third scheduler-specific flag, unused by the in-tree
	// schedulers.
	Sched3 ServiceFlags = 0x0020 // IP_VS_SVC_F_SCHED3
)

func (f ServiceFlags) String() string {
	names := []struct {
		flag ServiceFlags
		name string
	}{
		{Persistent, "persistent"},
		{Hashed, "hashed"},
		{OnePacket, "one-packet"},
		{svcFlagSched1, "sched1"},
		{svcFlagSched2, "sched2"},
		{svcFlagSched3, "sched3"},
	}
	var parts []string
	for _, n := range names {
		if f&n.flag != 0 {
			parts = append(parts, n.name)
			f &^= n.flag
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(f)))
	}
	return strings.Join(parts, "|")
}

// ForwardMethod is how packets reach a destination.
type ForwardMethod uint32

// Forwarding methods. Masquerade, Tunnel and Route are what users choose;
// the kernel reports LocalNode for a destination that is a local address.
const (
	Masquerade ForwardMethod = 0 // IP_VS_CONN_F_MASQ
	LocalNode  ForwardMethod = 1 // IP_VS_CONN_F_LOCALNODE
	Tunnel     ForwardMethod = 2 // IP_VS_CONN_F_TUNNEL
	Route      ForwardMethod = 3 // IP_VS_CONN_F_DROUTE
	Bypass     ForwardMethod = 4 // IP_VS_CONN_F_BYPASS
)

func (m ForwardMethod) String() string {
	switch m {
	case Masquerade:
		return "masq"
	case LocalNode:
		return "local"
	case Tunnel:
		return "tunnel"
	case Route:
		return "route"
	case Bypass:
		return "bypass"
	}
	return fmt.Sprintf("fwd(%d)", uint32(m))
}

// TunnelType is the encapsulation of a Tunnel destination.
type TunnelType uint8

// Tunnel types.
const (
	IPIP TunnelType = 0 // IP_VS_CONN_F_TUNNEL_TYPE_IPIP
	GUE  TunnelType = 1 // IP_VS_CONN_F_TUNNEL_TYPE_GUE
	GRE  TunnelType = 2 // IP_VS_CONN_F_TUNNEL_TYPE_GRE
)

func (t TunnelType) String() string {
	switch t {
	case IPIP:
		return "ipip"
	case GUE:
		return "gue"
	case GRE:
		return "gre"
	}
	return fmt.Sprintf("tunnel(%d)", uint8(t))
}

// TunnelFlags are the encapsulation flags of a GUE or GRE tunnel.
type TunnelFlags uint16

// Tunnel flags; none means no checksum.
const (
	TunnelChecksum       TunnelFlags = 1 // IP_VS_TUNNEL_ENCAP_FLAG_CSUM
	TunnelRemoteChecksum TunnelFlags = 2 // IP_VS_TUNNEL_ENCAP_FLAG_REMCSUM
)
