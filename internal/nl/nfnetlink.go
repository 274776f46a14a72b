package nl

// nfnetlink framing, from include/uapi/linux/netfilter/nfnetlink.h.

// NFGenMsgLen is the size of struct nfgenmsg.
const NFGenMsgLen = 4

// NFNetlinkV0 is the nfnetlink version requests carry.
const NFNetlinkV0 = 0

// NFType is a netfilter message's header type: subsystem and message.
func NFType(subsys uint8, msg uint8) uint16 { return uint16(subsys)<<8 | uint16(msg) }

// AppendNFGenMsg appends struct nfgenmsg: the address family, the
// nfnetlink version (NFNETLINK_V0 is 0) and res_id, which is 0 here.
func AppendNFGenMsg(b []byte, family, version uint8) []byte {
	return append(b, family, version, 0, 0)
}
