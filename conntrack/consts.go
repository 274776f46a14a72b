package conntrack

// Numbers from the kernel's UAPI headers include/uapi/linux/netlink.h,
// include/uapi/linux/netfilter/nfnetlink.h,
// include/uapi/linux/netfilter/nfnetlink_conntrack.h and
// include/uapi/linux/netfilter/nf_conntrack_common.h, plus the CTA_FILTER
// flag bits, which only net/netfilter/nf_conntrack_netlink.c defines.

// nfnetlink subsystem and the ctnetlink message types (enum cntl_msg_types).
const (
	subsysCTNetlink = 1

	msgNew      = 0
	msgGet      = 1
	msgDelete   = 2
	msgGetStats = 5
)

// enum ctattr_type.
const (
	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaStatus     = 3
	ctaTimeout    = 7
	ctaMark       = 8
	ctaID         = 12
	ctaZone       = 18
	ctaMarkMask   = 21
	ctaFilter     = 25
)

// enum ctattr_tuple.
const (
	ctaTupleIP    = 1
	ctaTupleProto = 2
)

// enum ctattr_ip.
const (
	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4
)

// enum ctattr_l4proto.
const (
	ctaProtoNum      = 1
	ctaProtoSrcPort  = 2
	ctaProtoDstPort  = 3
	ctaProtoICMPID   = 4
	ctaProtoICMPType = 5
	ctaProtoICMPCode = 6
	ctaProtoICMPv6ID = 7
	ctaProtoICMPv6Ty = 8
	ctaProtoICMPv6Co = 9
)

// enum ctattr_filter.
const (
	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
)

// CTA_FILTER_F_* from nf_conntrack_netlink.c: which fields of the filter
// tuple the kernel compares.
const (
	filterIPSrc   = 1 << 0
	filterIPDst   = 1 << 1
	filterProto   = 1 << 3
	filterSrcPort = 1 << 4
	filterDstPort = 1 << 5
)

// enum ctattr_stats_global.
const ctaStatsGlobalEntries = 1
