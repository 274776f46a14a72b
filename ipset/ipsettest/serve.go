package ipsettest

import (
	"encoding/binary"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// entriesPerMessage cuts a long listing into several messages, as the
// kernel cuts it where a dump buffer fills.
const entriesPerMessage = 256

// serve plays the kernel for one write: each request in order, its
// replies, then its acknowledgement if it asked for one or failed.
func (k *Kernel) serve(reqs []netlink.Message) []netlink.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []netlink.Message
	for _, m := range reqs {
		out = append(out, k.answer(m)...)
	}
	return out
}

func (k *Kernel) answer(m netlink.Message) []netlink.Message {
	cmd := uint8(m.Header.Type)
	if uint16(m.Header.Type)>>8 != subsysIPSet {
		return []netlink.Message{nl.Ack(m, int(unix.EINVAL), "")}
	}
	r, errno := parseRequest(cmd, m.Data)
	if errno != 0 {
		return []netlink.Message{nl.Ack(m, int(errno), "")}
	}
	if cmd == cmdList || cmd == cmdSave {
		return k.list(m, r)
	}
	var body []byte
	switch cmd {
	case cmdAdd, cmdDel, cmdTest:
		if fail := k.adt(m, cmd, r); fail != nil {
			return []netlink.Message{*fail}
		}
	default:
		body, errno = k.command(cmd, r, m.Header.Flags&netlink.Excl != 0)
	}
	if errno != 0 {
		return []netlink.Message{nl.Ack(m, int(errno), "")}
	}
	var out []netlink.Message
	if body != nil {
		out = append(out, reply(m, 0, body))
	}
	if m.Header.Flags&netlink.Acknowledge != 0 {
		out = append(out, nl.Ack(m, 0, ""))
	}
	return out
}

// command runs a command on sets, and returns the reply of a query.
func (k *Kernel) command(cmd uint8, r request, excl bool) ([]byte, unix.Errno) {
	switch cmd {
	case cmdProtocol:
		return payload(func(w *nl.Writer) { w.Uint8(attrProtocolMin, protocolMin) }), 0
	case cmdType:
		return typeReply(r)
	case cmdCreate:
		return nil, k.create(r, excl)
	case cmdDestroy:
		return nil, k.destroy(r)
	case cmdFlush:
		return nil, k.flush(r)
	case cmdRename:
		return nil, k.rename(r)
	case cmdSwap:
		return nil, k.swap(r)
	case cmdHeader:
		return k.header(r)
	case cmdGetByName:
		return k.getByName(r)
	}
	return nil, unix.EOPNOTSUPP
}

// adt runs add, del or test of one entry or, in IPSET_ATTR_ADT, many,
// stopping at the first that fails. The failure of a request that carries
// IPSET_ATTR_LINENO echoes the request with the entry's line number in
// it, as call_ad does; of another, it is a plain error.
func (k *Kernel) adt(m netlink.Message, cmd uint8, r request) *netlink.Message {
	fail := func(errno unix.Errno, lineno uint32) *netlink.Message {
		if !r.hasLineNo {
			ack := nl.Ack(m, int(errno), "")
			return &ack
		}
		return lineError(m, errno, lineno)
	}
	s := k.find(r.name)
	if s == nil {
		return fail(unix.ENOENT, 0)
	}
	exist := m.Header.Flags&netlink.Excl == 0
	datas := [][]byte{r.data}
	if !r.hasData {
		datas = entriesIn(r.adt)
	}
	for _, b := range datas {
		raw, errno := parseEntry(b)
		if errno != 0 {
			return fail(errno, raw.lineno)
		}
		e, errno := s.entry(raw)
		if errno == 0 {
			errno = s.adt(cmd, e, exist)
		}
		if errno != 0 {
			return fail(errno, raw.lineno)
		}
	}
	return nil
}

// entriesIn splits IPSET_ATTR_ADT into its IPSET_ATTR_DATA payloads.
func entriesIn(adt []byte) [][]byte {
	var out [][]byte
	d := nl.NewReader(adt, "adt")
	for d.Next() {
		if d.Type() == attrData {
			out = append(out, d.Bytes())
		}
	}
	return out
}

// lineError is the error call_ad sends for a bulk request: the request
// whole, its IPSET_ATTR_LINENO set to the failed entry's line.
func lineError(m netlink.Message, errno unix.Errno, lineno uint32) *netlink.Message {
	data := append([]byte(nil), m.Data...)
	// The Reader's payloads alias data, so the line number is set in place.
	d := nl.NewReader(data[min(4, len(data)):], "request")
	for d.Next() {
		if d.Type() == attrLineNo && len(d.Bytes()) == 4 {
			binary.BigEndian.PutUint32(d.Bytes(), lineno)
		}
	}
	body := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	body = nl.AppendMessage(body, uint16(m.Header.Type), m.Header.Flags, m.Header.Sequence, m.Header.PID, data)
	return &netlink.Message{
		Header: netlink.Header{Type: netlink.Error, Sequence: m.Header.Sequence, PID: m.Header.PID},
		Data:   body,
	}
}

// list answers a list dump: per set, its name, type and header, then its
// entries, as ip_set_dump_do writes them, and NLMSG_DONE.
func (k *Kernel) list(m netlink.Message, r request) []netlink.Message {
	if r.name != "" && k.find(r.name) == nil {
		return []netlink.Message{nl.Ack(m, int(unix.ENOENT), "")}
	}
	var out []netlink.Message
	for i, s := range k.sets {
		if s != nil && (r.name == "" || s.header.Name == r.name) {
			out = append(out, listSet(m, r.flags, i, s)...)
		}
	}
	done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: m.Header.Sequence, PID: m.Header.PID}, Data: make([]byte, 4)}
	return append(out, done)
}

func listSet(m netlink.Message, flags uint32, index int, s *set) []netlink.Message {
	first := payload(func(w *nl.Writer) {
		w.String(attrSetName, s.header.Name)
		if flags&flagListSetName != 0 {
			return
		}
		w.String(attrTypeName, string(s.header.Type))
		w.Uint8(attrFamily, uint8(s.header.Family))
		w.Uint8(attrRevision, s.header.Revision)
		w.BE16(attrIndex|be, uint16(index))
		writeHeaderData(w, s)
		if flags&flagListHeader == 0 {
			entries := s.list()
			writeADT(w, s, entries[:min(len(entries), entriesPerMessage)])
		}
	})
	out := []netlink.Message{reply(m, netlink.Multi, first)}
	if flags&(flagListSetName|flagListHeader) != 0 {
		return out
	}
	entries := s.list()
	for lo := entriesPerMessage; lo < len(entries); lo += entriesPerMessage {
		part := entries[lo:min(lo+entriesPerMessage, len(entries))]
		out = append(out, reply(m, netlink.Multi, payload(func(w *nl.Writer) {
			w.String(attrSetName, s.header.Name)
			writeADT(w, s, part)
		})))
	}
	return out
}

func writeADT(w *nl.Writer, s *set, entries []ipset.Entry) {
	n := w.Begin(attrADT | nested)
	for _, e := range entries {
		writeEntry(w, s, e)
	}
	w.End(n)
}

// reply frames a message of the request's type to it.
func reply(req netlink.Message, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: req.Header.Type, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   data,
	}
}
