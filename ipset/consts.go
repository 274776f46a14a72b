package ipset

// Protocol constants, transcribed from the Linux UAPI headers
// include/uapi/linux/netfilter/ipset/ip_set.h, ip_set_hash.h and
// ip_set_bitmap.h, and include/uapi/linux/netfilter/nfnetlink.h.

// nfnetlink framing.
const (
	nfnlSubsysIPSet = 6 // NFNL_SUBSYS_IPSET
	nfnetlinkV0     = 0 // NFNETLINK_V0
	nfgenmsgLen     = 4 // struct nfgenmsg: family, version, res_id
	afINET          = 2 // nfgen_family sent by ipset(8) on every message
)

// Protocol versions.
const (
	protocolNewest = 7 // IPSET_PROTOCOL
	protocolMin    = 6 // IPSET_PROTOCOL_MIN
	maxNameLen     = 32
	maxCommentSize = 255
)

// enum ipset_cmd.
const (
	cmdProtocol  = 1  // IPSET_CMD_PROTOCOL
	cmdCreate    = 2  // IPSET_CMD_CREATE
	cmdDestroy   = 3  // IPSET_CMD_DESTROY
	cmdFlush     = 4  // IPSET_CMD_FLUSH
	cmdRename    = 5  // IPSET_CMD_RENAME
	cmdSwap      = 6  // IPSET_CMD_SWAP
	cmdList      = 7  // IPSET_CMD_LIST
	cmdAdd       = 9  // IPSET_CMD_ADD
	cmdDel       = 10 // IPSET_CMD_DEL
	cmdTest      = 11 // IPSET_CMD_TEST
	cmdHeader    = 12 // IPSET_CMD_HEADER
	cmdType      = 13 // IPSET_CMD_TYPE
	cmdGetByName = 14 // IPSET_CMD_GET_BYNAME
)

// Command-level attributes.
const (
	attrProtocol    = 1  // IPSET_ATTR_PROTOCOL
	attrSetName     = 2  // IPSET_ATTR_SETNAME
	attrTypeName    = 3  // IPSET_ATTR_TYPENAME
	attrSetName2    = 3  // IPSET_ATTR_SETNAME2
	attrRevision    = 4  // IPSET_ATTR_REVISION
	attrFamily      = 5  // IPSET_ATTR_FAMILY
	attrFlags       = 6  // IPSET_ATTR_FLAGS
	attrData        = 7  // IPSET_ATTR_DATA
	attrADT         = 8  // IPSET_ATTR_ADT
	attrLineNo      = 9  // IPSET_ATTR_LINENO
	attrProtocolMin = 10 // IPSET_ATTR_PROTOCOL_MIN
	attrRevisionMin = 10 // IPSET_ATTR_REVISION_MIN
	attrIndex       = 11 // IPSET_ATTR_INDEX
)

// Attributes inside IPSET_ATTR_DATA, for create and for entries.
const (
	attrIP        = 1  // IPSET_ATTR_IP
	attrCIDR      = 3  // IPSET_ATTR_CIDR
	attrPort      = 4  // IPSET_ATTR_PORT, IPSET_ATTR_PORT_FROM
	attrPortTo    = 5  // IPSET_ATTR_PORT_TO
	attrTimeout   = 6  // IPSET_ATTR_TIMEOUT
	attrProto     = 7  // IPSET_ATTR_PROTO
	attrCADTFlags = 8  // IPSET_ATTR_CADT_FLAGS
	attrCADTLine  = 9  // IPSET_ATTR_CADT_LINENO
	attrInitVal   = 17 // IPSET_ATTR_INITVAL
	attrHashSize  = 18 // IPSET_ATTR_HASHSIZE
	attrMaxElem   = 19 // IPSET_ATTR_MAXELEM
	attrBucket    = 21 // IPSET_ATTR_BUCKETSIZE
	attrElements  = 24 // IPSET_ATTR_ELEMENTS
	attrRefs      = 25 // IPSET_ATTR_REFERENCES
	attrMemSize   = 26 // IPSET_ATTR_MEMSIZE
	attrIP2       = 20 // IPSET_ATTR_IP2
	attrCIDR2     = 21 // IPSET_ATTR_CIDR2
	attrBytes     = 24 // IPSET_ATTR_BYTES
	attrPackets   = 25 // IPSET_ATTR_PACKETS
	attrComment   = 26 // IPSET_ATTR_COMMENT
)

// Attributes nested in IPSET_ATTR_IP and IPSET_ATTR_IP2.
const (
	attrIPv4 = 1 // IPSET_ATTR_IPADDR_IPV4
	attrIPv6 = 2 // IPSET_ATTR_IPADDR_IPV6
)

// enum ipset_cmd_flags, sent in IPSET_ATTR_FLAGS.
const (
	flagListSetName = 1 << 1 // IPSET_FLAG_LIST_SETNAME
	flagListHeader  = 1 << 2 // IPSET_FLAG_LIST_HEADER
)

// enum ipset_cadt_flags, sent in IPSET_ATTR_CADT_FLAGS.
const (
	flagWithCounters = 1 << 3 // IPSET_FLAG_WITH_COUNTERS
	flagWithComment  = 1 << 4 // IPSET_FLAG_WITH_COMMENT
)

// enum ipset_errno and the type-specific codes: the kernel returns these
// negated in netlink errors.
const (
	errProtocol     = 4097 // IPSET_ERR_PROTOCOL
	errFindType     = 4098 // IPSET_ERR_FIND_TYPE
	errBusy         = 4100 // IPSET_ERR_BUSY
	errExistSetName = 4101 // IPSET_ERR_EXIST_SETNAME2
	errTypeMismatch = 4102 // IPSET_ERR_TYPE_MISMATCH
	errExist        = 4103 // IPSET_ERR_EXIST
	errInvalidCIDR  = 4104 // IPSET_ERR_INVALID_CIDR
	errInvalidFam   = 4106 // IPSET_ERR_INVALID_FAMILY
	errTimeout      = 4107 // IPSET_ERR_TIMEOUT
	errReferenced   = 4108 // IPSET_ERR_REFERENCED
	errIPv4         = 4109 // IPSET_ERR_IPADDR_IPV4
	errIPv6         = 4110 // IPSET_ERR_IPADDR_IPV6
	errCounter      = 4111 // IPSET_ERR_COUNTER
	errComment      = 4112 // IPSET_ERR_COMMENT
	errTypeSpecific = 4352 // IPSET_ERR_TYPE_SPECIFIC
	errHashFull     = 4352 // IPSET_ERR_HASH_FULL
	errHashElem     = 4353 // IPSET_ERR_HASH_ELEM
	errInvalidProto = 4354 // IPSET_ERR_INVALID_PROTO
	errMissingProto = 4355 // IPSET_ERR_MISSING_PROTO
	errBitmapRange  = 4352 // IPSET_ERR_BITMAP_RANGE
)
