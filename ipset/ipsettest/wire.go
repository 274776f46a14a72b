package ipsettest

import (
	"net/netip"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset"
	"golang.org/x/sys/unix"
)

// The kernel's side of the wire, transcribed from the UAPI headers
// include/uapi/linux/netfilter/ipset/ip_set*.h and written apart from
// package ipset's encoder, so that a mistake there shows as a
// disagreement with the fake rather than cancelling out.

const (
	subsysIPSet = 6 // NFNL_SUBSYS_IPSET
	protocol    = 7 // IPSET_PROTOCOL
	protocolMin = 6 // IPSET_PROTOCOL_MIN
	maxNameLen  = 32
	be          = nl.NetByteOrder
	nested      = nl.Nested
)

// Commands (enum ipset_cmd).
const (
	cmdProtocol  = 1
	cmdCreate    = 2
	cmdDestroy   = 3
	cmdFlush     = 4
	cmdRename    = 5
	cmdSwap      = 6
	cmdList      = 7
	cmdSave      = 8
	cmdAdd       = 9
	cmdDel       = 10
	cmdTest      = 11
	cmdHeader    = 12
	cmdType      = 13
	cmdGetByName = 14
)

// Command attributes (IPSET_ATTR_*).
const (
	attrProtocol    = 1
	attrSetName     = 2
	attrTypeName    = 3
	attrSetName2    = 3
	attrRevision    = 4
	attrFamily      = 5
	attrFlags       = 6
	attrData        = 7
	attrADT         = 8
	attrLineNo      = 9
	attrProtocolMin = 10
	attrRevisionMin = 10
	attrIndex       = 11
)

// Attributes in IPSET_ATTR_DATA, of sets and of entries.
const (
	attrIP        = 1
	attrCIDR      = 3
	attrPort      = 4
	attrPortTo    = 5
	attrTimeout   = 6
	attrProto     = 7
	attrCADTFlags = 8
	attrCADTLine  = 9
	attrHashSize  = 18
	attrMaxElem   = 19
	attrIP2       = 20
	attrCIDR2     = 21
	attrElements  = 24
	attrBytes     = 24
	attrRefs      = 25
	attrPackets   = 25
	attrMemSize   = 26
	attrComment   = 26
	attrIPv4      = 1
	attrIPv6      = 2
)

// Flags: IPSET_FLAG_LIST_SETNAME and _HEADER in IPSET_ATTR_FLAGS, and the
// extensions in IPSET_ATTR_CADT_FLAGS.
const (
	flagListSetName  = 1 << 1
	flagListHeader   = 1 << 2
	flagWithCounters = 1 << 3
	flagWithComment  = 1 << 4
)

// The ipset errnos (enum ipset_errno and the type-specific ones).
const (
	errProtocol     unix.Errno = 4097
	errFindType     unix.Errno = 4098
	errBusy         unix.Errno = 4100
	errExistSetName unix.Errno = 4101
	errTypeMismatch unix.Errno = 4102
	errExist        unix.Errno = 4103
	errInvalidCIDR  unix.Errno = 4104
	errInvalidFam   unix.Errno = 4106
	errTimeout      unix.Errno = 4107
	errReferenced   unix.Errno = 4108
	errCounter      unix.Errno = 4111
	errComment      unix.Errno = 4112
	errHashFull     unix.Errno = 4352
	errBitmapRange  unix.Errno = 4352
	errInvalidProto unix.Errno = 4354
	errMissingProto unix.Errno = 4355
)

// request is a command's attributes.
type request struct {
	protocol        uint8
	name, name2     string
	typeName        string
	revision        uint8
	family          inet.Family
	flags           uint32
	data, adt       []byte
	hasData, hasADT bool
	hasLineNo       bool
}

// parseRequest reads a command's attributes after its struct nfgenmsg.
// Set names are at most 31 bytes, as the kernel's policy has them.
func parseRequest(cmd uint8, b []byte) (request, unix.Errno) {
	var r request
	if len(b) < 4 {
		return r, unix.EINVAL
	}
	d := nl.NewReader(b[4:], "request")
	for d.Next() {
		switch d.Type() {
		case attrProtocol:
			r.protocol = d.Uint8()
		case attrSetName:
			r.name = d.String(maxNameLen)
		case attrTypeName: // also attrSetName2
			if cmd == cmdRename || cmd == cmdSwap {
				r.name2 = d.String(maxNameLen)
			} else {
				r.typeName = d.String(maxNameLen)
			}
		case attrRevision:
			r.revision = d.Uint8()
		case attrFamily:
			r.family = inet.Family(d.Uint8())
		case attrFlags:
			r.flags = d.BE32()
		case attrData:
			r.data, r.hasData = d.Bytes(), true
		case attrADT:
			r.adt, r.hasADT = d.Bytes(), true
		case attrLineNo:
			r.hasLineNo = true
		}
	}
	if d.Err() != nil {
		return r, errProtocol
	}
	if r.protocol < protocolMin || r.protocol > protocol {
		return r, errProtocol
	}
	return r, 0
}

// createData is what IPSET_ATTR_DATA of a create carries.
type createData struct {
	portFrom, portTo uint16
	hasPorts         bool
	timeout          time.Duration
	cadtFlags        uint32
	hashSize         uint32
	maxElem          uint32
}

func parseCreateData(b []byte) (createData, unix.Errno) {
	var c createData
	d := nl.NewReader(b, "create data")
	for d.Next() {
		switch d.Type() {
		case attrPort:
			c.portFrom, c.hasPorts = d.BE16(), true
		case attrPortTo:
			c.portTo = d.BE16()
		case attrTimeout:
			c.timeout = time.Duration(d.BE32()) * time.Second
		case attrCADTFlags:
			c.cadtFlags = d.BE32()
		case attrHashSize:
			c.hashSize = d.BE32()
		case attrMaxElem:
			c.maxElem = d.BE32()
		}
	}
	if d.Err() != nil {
		return c, errProtocol
	}
	return c, 0
}

// rawEntry is an entry's attributes as sent, before the set's type says
// what they mean.
type rawEntry struct {
	ip, ip2        netip.Addr
	cidr, cidr2    int // -1: not given
	port           uint16
	hasPort        bool
	proto          uint8
	hasProto       bool
	timeout        uint32
	hasTimeout     bool
	lineno         uint32
	comment        string
	bytes, packets uint64
	hasCounters    bool
}

func parseEntry(b []byte) (rawEntry, unix.Errno) {
	r := rawEntry{cidr: -1, cidr2: -1}
	d := nl.NewReader(b, "entry")
	for d.Next() {
		switch d.Type() {
		case attrIP:
			r.ip = parseAddr(&d)
		case attrIP2:
			r.ip2 = parseAddr(&d)
		case attrCIDR:
			r.cidr = int(d.Uint8())
		case attrCIDR2:
			r.cidr2 = int(d.Uint8())
		case attrPort:
			r.port, r.hasPort = d.BE16(), true
		case attrProto:
			r.proto, r.hasProto = d.Uint8(), true
		case attrTimeout:
			r.timeout, r.hasTimeout = d.BE32(), true
		case attrCADTLine:
			r.lineno = d.BE32()
		case attrComment:
			r.comment = d.String(0)
		case attrBytes:
			r.bytes, r.hasCounters = d.BE64(), true
		case attrPackets:
			r.packets, r.hasCounters = d.BE64(), true
		}
	}
	if d.Err() != nil {
		return r, errProtocol
	}
	return r, 0
}

// parseAddr reads the IPv4 or IPv6 address nested in IPSET_ATTR_IP(2).
func parseAddr(d *nl.Reader) netip.Addr {
	var a netip.Addr
	d.Nest(func(n *nl.Reader) {
		for n.Next() {
			if n.Type() == attrIPv4 || n.Type() == attrIPv6 {
				a = n.Addr()
			}
		}
	})
	return a
}

// payload builds a reply's payload: struct nfgenmsg, then the protocol
// version, then what fill writes.
func payload(fill func(w *nl.Writer)) []byte {
	w := nl.Writer{B: nl.AppendNFGenMsg(nil, 2, 0)}
	w.Uint8(attrProtocol, protocol)
	fill(&w)
	return w.B
}

// writeEntry writes an entry's IPSET_ATTR_DATA as the kernel lists it.
func writeEntry(w *nl.Writer, s *set, e ipset.Entry) {
	n := w.Begin(attrData | nested)
	switch {
	case e.Addr.IsValid():
		writeAddr(w, attrIP, e.Addr)
	case e.Net.IsValid():
		writeAddr(w, attrIP, e.Net.Addr())
		w.Uint8(attrCIDR, uint8(e.Net.Bits()))
	}
	if l, _ := layoutOf(s.header.Type); l.port || s.header.Type == ipset.BitmapPort {
		w.BE16(attrPort|be, e.Port)
	}
	if e.Protocol != 0 {
		w.Uint8(attrProto, uint8(e.Protocol))
	}
	switch {
	case e.Addr2.IsValid():
		writeAddr(w, attrIP2, e.Addr2)
	case e.Net2.IsValid():
		writeAddr(w, attrIP2, e.Net2.Addr())
		w.Uint8(attrCIDR2, uint8(e.Net2.Bits()))
	}
	writeExtensions(w, s, e)
	w.End(n)
}

// writeExtensions writes what the set's extensions keep of an entry: the
// fake's entries never expire, so the timeout is the one set.
func writeExtensions(w *nl.Writer, s *set, e ipset.Entry) {
	if s.header.Timeout != 0 {
		t := uint32(e.Timeout / time.Second)
		if e.Timeout == ipset.Permanent {
			t = 0
		}
		w.BE32(attrTimeout|be, t)
	}
	if s.header.Counters {
		var c ipset.Counters
		if e.Counters != nil {
			c = *e.Counters
		}
		w.BE64(attrBytes|be, c.Bytes)
		w.BE64(attrPackets|be, c.Packets)
	}
	if s.header.Comment && e.Comment != "" {
		w.String(attrComment, e.Comment)
	}
}

func writeAddr(w *nl.Writer, typ uint16, a netip.Addr) {
	n := w.Begin(typ | nested)
	if a.Is4() {
		w.Addr(attrIPv4|be, a)
	} else {
		w.Addr(attrIPv6|be, a)
	}
	w.End(n)
}

// writeHeaderData writes a set's IPSET_ATTR_DATA as list reports it.
func writeHeaderData(w *nl.Writer, s *set) {
	h := s.header
	n := w.Begin(attrData | nested)
	if h.Type == ipset.BitmapPort {
		w.BE16(attrPort|be, h.PortFrom)
		w.BE16(attrPortTo|be, h.PortTo)
	} else {
		w.BE32(attrHashSize|be, h.HashSize)
		w.BE32(attrMaxElem|be, h.MaxElem)
	}
	if h.Timeout != 0 {
		w.BE32(attrTimeout|be, uint32(h.Timeout/time.Second))
	}
	var flags uint32
	if h.Counters {
		flags |= flagWithCounters
	}
	if h.Comment {
		flags |= flagWithComment
	}
	if flags != 0 {
		w.BE32(attrCADTFlags|be, flags)
	}
	w.BE32(attrRefs|be, s.refs)
	w.BE32(attrMemSize|be, 0)
	w.BE32(attrElements|be, uint32(len(s.at)))
	w.End(n)
}
