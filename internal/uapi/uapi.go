// Package uapi spells the constants of Linux's netlink protocols that the
// library's packages put on the wire, with Linux's values on every GOOS:
// golang.org/x/sys/unix has most of them on Linux only, and some (AF_INET6,
// RTM_NEWADDR) with other values elsewhere, which would garble the
// messages the in-memory fakes exchange. Errnos are not here: they are the
// host's syscall.Errno, on the wire of a fake as in errors.Is.
package uapi

// Address families, from include/linux/socket.h.
const (
	AF_UNSPEC = 0
	AF_INET   = 2
	AF_INET6  = 10
)

// Netlink protocols, from include/uapi/linux/netlink.h.
const (
	NETLINK_ROUTE     = 0
	NETLINK_NETFILTER = 12
	NETLINK_GENERIC   = 16
)

// rtnetlink message types, from include/uapi/linux/rtnetlink.h.
const (
	RTM_NEWLINK  = 16
	RTM_DELLINK  = 17
	RTM_GETLINK  = 18
	RTM_NEWADDR  = 20
	RTM_DELADDR  = 21
	RTM_GETADDR  = 22
	RTM_NEWROUTE = 24
	RTM_DELROUTE = 25
	RTM_GETROUTE = 26
)

// Route attributes, types, origins, scopes and tables, from
// include/uapi/linux/rtnetlink.h.
const (
	RTA_DST     = 1
	RTA_OIF     = 4
	RTA_PREFSRC = 7
	RTA_TABLE   = 15

	RTN_UNICAST = 1
	RTN_LOCAL   = 2

	RTPROT_KERNEL = 2
	RTPROT_STATIC = 4

	RT_SCOPE_HOST    = 254
	RT_SCOPE_NOWHERE = 255

	RT_TABLE_COMPAT = 252
	RT_TABLE_MAIN   = 254
	RT_TABLE_LOCAL  = 255
)

// Address attributes and flags, from include/uapi/linux/if_addr.h.
const (
	IFA_ADDRESS = 1
	IFA_LOCAL   = 2
	IFA_LABEL   = 3
	IFA_FLAGS   = 8

	IFA_F_NODAD     = 0x2
	IFA_F_PERMANENT = 0x80
)

// Link attributes, from include/uapi/linux/if_link.h.
const (
	IFLA_IFNAME    = 3
	IFLA_LINKINFO  = 18
	IFLA_NET_NS_FD = 28

	IFLA_INFO_KIND = 1
	IFLA_INFO_DATA = 2
)

// Link types and flags, from include/uapi/linux/if_arp.h and if.h.
const (
	ARPHRD_ETHER    = 1
	ARPHRD_LOOPBACK = 772

	IFF_UP      = 0x1
	IFF_RUNNING = 0x40

	IFNAMSIZ = 16
)
