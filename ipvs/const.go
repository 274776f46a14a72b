package ipvs

// Kernel constants, transcribed from include/uapi/linux/ip_vs.h (Linux 6.1;
// the generic netlink interface has been stable since 2.6.28, with the
// destination family added in 3.18, 64-bit stats in 4.1 and tunnel
// settings in 5.2). Only what this package uses is listed.

// Generic netlink family.
const (
	genlName    = "IPVS"
	genlVersion = 1
)

// Commands (enum IPVS_CMD_*).
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
	cmdGetInfo    = 15
	cmdZero       = 16
	cmdFlush      = 17
)

// First-level command attributes (enum IPVS_CMD_ATTR_*).
const (
	cmdAttrService       = 1
	cmdAttrDest          = 2
	cmdAttrTimeoutTCP    = 4
	cmdAttrTimeoutTCPFin = 5
	cmdAttrTimeoutUDP    = 6
)

// Service attributes, nested in cmdAttrService (enum IPVS_SVC_ATTR_*).
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

// Destination attributes, nested in cmdAttrDest (enum IPVS_DEST_ATTR_*).
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

// Statistics attributes, nested in the *_STATS and *_STATS64 attributes
// (enum IPVS_STATS_ATTR_*). In STATS the counters are u32 except the byte
// counters (u64); in STATS64 all are u64.
const (
	statsAttrConns    = 1
	statsAttrInPkts   = 2
	statsAttrOutPkts  = 3
	statsAttrInBytes  = 4
	statsAttrOutBytes = 5
	statsAttrCPS      = 6
	statsAttrInPPS    = 7
	statsAttrOutPPS   = 8
	statsAttrInBPS    = 9
	statsAttrOutBPS   = 10
)

// Info attributes, in the reply to cmdGetInfo (enum IPVS_INFO_ATTR_*).
const (
	infoAttrVersion     = 1
	infoAttrConnTabSize = 2
)

// Service flags (IP_VS_SVC_F_*). The sh and mh schedulers give SCHED1 and
// SCHED2 their own meanings (ip_vs_sh.c, ip_vs_mh.c).
const (
	svcFlagPersistent = 0x0001
	svcFlagHashed     = 0x0002
	svcFlagOnePacket  = 0x0004
	svcFlagSched1     = 0x0008
	svcFlagSched2     = 0x0010
	svcFlagSched3     = 0x0020
)

// Connection flags carried by a destination (IP_VS_CONN_F_*).
const (
	connFwdMask      = 0x0007
	connFwdMasq      = 0x0000
	connFwdLocalNode = 0x0001
	connFwdTunnel    = 0x0002
	connFwdDRoute    = 0x0003
	connFwdBypass    = 0x0004
)

// IP_VS_SCHEDNAME_MAXLEN and IP_VS_PENAME_MAXLEN include the terminating NUL.
const (
	schedNameMaxLen = 16
	peNameMaxLen    = 16
)

// Address attributes hold a union nf_inet_addr: 16 bytes whatever the family.
const inetAddrLen = 16
