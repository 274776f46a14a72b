package ipset

import (
	"math"
	"time"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// maxMessage bounds one bulk request: the entries ride in one
// IPSET_ATTR_ADT attribute, whose length is 16 bits.
const maxMessage = math.MaxUint16 + 1024

// request frames attributes as an ipset request: nfgenmsg, then
// IPSET_ATTR_PROTOCOL, then whatever fn adds.
func request(protocol, cmd uint8, flags netlink.HeaderFlags, fn func(w *nl.Writer)) *nl.Request {
	w := &nl.Writer{B: nl.AppendNFGenMsg(make([]byte, 0, 64), afINET, nl.NFNetlinkV0)}
	w.Uint8(attrProtocol, protocol)
	if fn != nil {
		fn(w)
	}
	return &nl.Request{Type: nl.NFType(nfnlSubsysIPSet, cmd), Flags: flags, Data: w.B}
}

func encodeProtocol(protocol uint8) *nl.Request {
	return request(protocol, cmdProtocol, 0, nil)
}

func encodeType(protocol uint8, t Type, f inet.Family) *nl.Request {
	return request(protocol, cmdType, 0, func(w *nl.Writer) {
		w.String(attrTypeName, string(t))
		w.Uint8(attrFamily, uint8(f))
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

func encodeCreate(protocol uint8, s Set, revision uint8, exclusive bool) *nl.Request {
	return request(protocol, cmdCreate, netlink.Acknowledge|netlink.Create|excl(exclusive), func(w *nl.Writer) {
		w.String(attrSetName, s.Name)
		w.String(attrTypeName, string(s.Type))
		w.Uint8(attrRevision, revision)
		w.Uint8(attrFamily, uint8(s.family()))
		n := w.Begin(attrData | nl.Nested)
		if s.Type == BitmapPort {
			w.BE16(attrPort|be, s.PortFrom)
			w.BE16(attrPortTo|be, s.PortTo)
		}
		if s.Timeout != 0 {
			w.BE32(attrTimeout|be, seconds(s.Timeout))
		}
		var flags uint32
		if s.Counters {
			flags |= flagWithCounters
		}
		if s.Comment {
			flags |= flagWithComment
		}
		if flags != 0 {
			w.BE32(attrCADTFlags|be, flags)
		}
		if s.HashSize != 0 {
			w.BE32(attrHashSize|be, s.HashSize)
		}
		if s.MaxElem != 0 {
			w.BE32(attrMaxElem|be, s.MaxElem)
		}
		w.End(n)
	})
}

func seconds(d time.Duration) uint32 {
	return uint32(min(d/time.Second, math.MaxUint32))
}

// encodeNamed builds the requests that name one set and nothing else:
// destroy, flush, header, get-by-name.
func encodeNamed(protocol, cmd uint8, flags netlink.HeaderFlags, name string) *nl.Request {
	return request(protocol, cmd, flags, func(w *nl.Writer) {
		w.String(attrSetName, name)
	})
}

// encodeTwoNames builds rename and swap.
func encodeTwoNames(protocol, cmd uint8, from, to string) *nl.Request {
	return request(protocol, cmd, netlink.Acknowledge, func(w *nl.Writer) {
		w.String(attrSetName, from)
		w.String(attrSetName2, to)
	})
}

// encodeList builds a dump request: every set when name is empty, and only
// names or headers as flags say.
func encodeList(protocol uint8, name string, flags uint32) *nl.Request {
	return request(protocol, cmdList, netlink.Dump|netlink.Acknowledge, func(w *nl.Writer) {
		if name != "" {
			w.String(attrSetName, name)
		}
		if flags != 0 {
			w.BE32(attrFlags|be, flags)
		}
	})
}

// encodeEntryCmd builds add, del or test for a single entry. Add and del
// carry a line number of 0, as ipset(8) sends them; test none, and only the
// entry's key: the kernel would add test's counters to the entry's.
func encodeEntryCmd(protocol, cmd uint8, name string, e Entry, exclusive bool) *nl.Request {
	var data nl.Writer
	if cmd == cmdTest {
		writeEntry(&data, Entry{Addr: e.Addr, Net: e.Net, Protocol: e.Protocol, Port: e.Port, Addr2: e.Addr2, Net2: e.Net2})
	} else {
		writeEntry(&data, e)
		data.BE32(attrCADTLine|be, 0)
	}
	return request(protocol, cmd, netlink.Acknowledge|excl(exclusive), func(w *nl.Writer) {
		w.String(attrSetName, name)
		w.Bytes(attrData|nl.Nested, data.B)
	})
}

// encodeBulk builds add or del for many entries in one message. Each entry
// carries its line number and the message carries IPSET_ATTR_LINENO (the
// first entry's, as ipset restore sends it), which makes the kernel report
// the number of an entry that fails. adt holds the entries' IPSET_ATTR_DATA
// attributes, from writeEntryAttr.
func encodeBulk(protocol, cmd uint8, name string, firstLine uint32, adt []byte, exclusive bool) *nl.Request {
	return request(protocol, cmd, netlink.Acknowledge|excl(exclusive), func(w *nl.Writer) {
		w.String(attrSetName, name)
		w.BE32(attrLineNo|be, firstLine)
		w.Bytes(attrADT|nl.Nested, adt)
	})
}

// checkName is the validation every request naming a set shares.
func checkName(op, name string) error {
	if err := validName(name); err != nil {
		return &OpError{Op: op, Object: name, Err: err}
	}
	return nil
}
