package ipset

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/mdlayher/netlink"
)

// maxMessage bounds one bulk request: the entries ride in one
// IPSET_ATTR_ADT attribute, whose length is 16 bits.
const maxMessage = math.MaxUint16 + 1024

// newEncoder returns an attribute encoder for ipset, whose integers are all
// in network byte order.
func newEncoder() *netlink.AttributeEncoder {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	return ae
}

// message frames attributes as an ipset request: nfgenmsg, then
// IPSET_ATTR_PROTOCOL, then whatever fn adds.
func message(protocol, cmd uint8, flags netlink.HeaderFlags, fn func(ae *netlink.AttributeEncoder)) (netlink.Message, error) {
	ae := newEncoder()
	ae.Uint8(attrProtocol, protocol)
	if fn != nil {
		fn(ae)
	}
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	data := make([]byte, 0, nfgenmsgLen+len(attrs))
	data = append(data, afINET, nfnetlinkV0, 0, 0)
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysIPSet<<8 | uint16(cmd)),
			Flags: netlink.Request | flags,
		},
		Data: append(data, attrs...),
	}, nil
}

func encodeProtocol(protocol uint8) netlink.Message {
	m, _ := message(protocol, cmdProtocol, 0, nil)
	return m
}

func encodeType(protocol uint8, t Type, f Family) (netlink.Message, error) {
	return message(protocol, cmdType, 0, func(ae *netlink.AttributeEncoder) {
		ae.String(attrTypeName, string(t))
		ae.Uint8(attrFamily, uint8(f))
	})
}

// excl asks the kernel to fail on something already there; without it the
// kernel accepts an existing set or entry (ipset's -exist).
func excl(exclusive bool) netlink.HeaderFlags {
	if exclusive {
		return netlink.Excl
	}
	return 0
}

func encodeCreate(protocol uint8, s Set, revision uint8, exclusive bool) (netlink.Message, error) {
	return message(protocol, cmdCreate, netlink.Acknowledge|netlink.Create|excl(exclusive), func(ae *netlink.AttributeEncoder) {
		ae.String(attrSetName, s.Name)
		ae.String(attrTypeName, string(s.Type))
		ae.Uint8(attrRevision, revision)
		ae.Uint8(attrFamily, uint8(s.family()))
		ae.Nested(attrData, func(d *netlink.AttributeEncoder) error {
			if s.Type == BitmapPort {
				d.Uint16(attrPort|netlink.NetByteOrder, s.PortFrom)
				d.Uint16(attrPortTo|netlink.NetByteOrder, s.PortTo)
			}
			if s.Timeout != 0 {
				d.Uint32(attrTimeout|netlink.NetByteOrder, seconds(s.Timeout))
			}
			var flags uint32
			if s.Counters {
				flags |= flagWithCounters
			}
			if s.Comment {
				flags |= flagWithComment
			}
			if flags != 0 {
				d.Uint32(attrCADTFlags|netlink.NetByteOrder, flags)
			}
			if s.HashSize != 0 {
				d.Uint32(attrHashSize|netlink.NetByteOrder, s.HashSize)
			}
			if s.MaxElem != 0 {
				d.Uint32(attrMaxElem|netlink.NetByteOrder, s.MaxElem)
			}
			return nil
		})
	})
}

func seconds(d time.Duration) uint32 {
	return uint32(min(d/time.Second, math.MaxUint32))
}

// encodeNamed builds the requests that name one set and nothing else:
// destroy, flush, header, get-by-name.
func encodeNamed(protocol, cmd uint8, flags netlink.HeaderFlags, name string) (netlink.Message, error) {
	return message(protocol, cmd, flags, func(ae *netlink.AttributeEncoder) {
		ae.String(attrSetName, name)
	})
}

// encodeTwoNames builds rename and swap.
func encodeTwoNames(protocol, cmd uint8, from, to string) (netlink.Message, error) {
	return message(protocol, cmd, netlink.Acknowledge, func(ae *netlink.AttributeEncoder) {
		ae.String(attrSetName, from)
		ae.String(attrSetName2, to)
	})
}

// encodeList builds a dump request: every set when name is empty, and only
// names or headers as flags say.
func encodeList(protocol uint8, name string, flags uint32) (netlink.Message, error) {
	return message(protocol, cmdList, netlink.Dump|netlink.Acknowledge, func(ae *netlink.AttributeEncoder) {
		if name != "" {
			ae.String(attrSetName, name)
		}
		if flags != 0 {
			ae.Uint32(attrFlags|netlink.NetByteOrder, flags)
		}
	})
}

// encodeEntryCmd builds add, del or test for a single entry. Add and del
// carry a line number of 0, as ipset(8) sends them; test none, and only the
// entry's key: the kernel would add test's counters to the entry's.
func encodeEntryCmd(protocol, cmd uint8, name string, e Entry, exclusive bool) (netlink.Message, error) {
	var data []byte
	if cmd == cmdTest {
		data = appendEntry(nil, Entry{Addr: e.Addr, Net: e.Net, Proto: e.Proto, Port: e.Port, Addr2: e.Addr2, Net2: e.Net2})
	} else {
		data = appendBE32(appendEntry(nil, e), attrCADTLine, 0)
	}
	return message(protocol, cmd, netlink.Acknowledge|excl(exclusive), func(ae *netlink.AttributeEncoder) {
		ae.String(attrSetName, name)
		ae.Bytes(attrData|netlink.Nested, data)
	})
}

// encodeBulk builds add or del for many entries in one message. Each entry
// carries its line number and the message carries IPSET_ATTR_LINENO (the
// first entry's, as ipset restore sends it), which makes the kernel report
// the number of an entry that fails. adt holds the entries' IPSET_ATTR_DATA
// attributes, from appendEntryAttr.
func encodeBulk(protocol, cmd uint8, name string, firstLine uint32, adt []byte, exclusive bool) (netlink.Message, error) {
	return message(protocol, cmd, netlink.Acknowledge|excl(exclusive), func(ae *netlink.AttributeEncoder) {
		ae.String(attrSetName, name)
		ae.Uint32(attrLineNo|netlink.NetByteOrder, firstLine)
		ae.Bytes(attrADT|netlink.Nested, adt)
	})
}

// checkName is the validation every request naming a set shares.
func checkName(op, name string) error {
	if err := validName(name); err != nil {
		return &OpError{Op: op, Set: name, Err: err}
	}
	return nil
}
