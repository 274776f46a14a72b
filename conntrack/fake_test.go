package conntrack

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// fakeKernel plays ctnetlink for unit tests: a table, dumps that ignore
// every filter but the family (like an old kernel), deletes that answer
// ENOENT for unknown tuples, and one reply per datagram as the kernel sends
// acks.
type fakeKernel struct {
	t     *testing.T
	table []Flow
	// ghosts are dumped but already gone when the delete comes.
	ghosts []Flow
	// interruptions is how many dumps get NLM_F_DUMP_INTR.
	interruptions int
	// refuseFilter answers dumps carrying CTA_FILTER with EOPNOTSUPP.
	refuseFilter bool
	// deleteErrno, if set, answers every delete with it.
	deleteErrno unix.Errno

	dumps, writes int
	// deleteWrites records, per write, how many deletes it held and which
	// of them asked for an ack.
	deleteWrites [][]bool
	pending      []netlink.Message
}

// conn returns a Conn on the fake, with the kernel's default socket
// buffers (net.core.rmem_default, doubled), so that many deletes take
// several writes.
func (k *fakeKernel) conn() *Conn {
	return newConn(nl.NewConn(nl.Serve(k.handle), 2*212992, 2*212992))
}

func (k *fakeKernel) handle(reqs []netlink.Message) []netlink.Message {
	k.writes++
	var acks []bool
	for _, req := range reqs {
		switch uint8(req.Header.Type) {
		case msgGet:
			if req.Header.Flags&netlink.Dump == 0 {
				k.t.Fatalf("unexpected get %+v", req)
			}
			return k.dump(req)
		case msgDelete:
			acks = append(acks, req.Header.Flags&netlink.Acknowledge != 0)
			k.delete(req)
		default:
			k.t.Fatalf("unexpected request %+v", req)
		}
	}
	k.deleteWrites = append(k.deleteWrites, acks)
	out := k.pending
	k.pending = nil
	return out
}

func (k *fakeKernel) dump(req netlink.Message) []netlink.Message {
	k.dumps++
	ad, err := newDecoder(req.Data)
	if err != nil {
		k.t.Fatal(err)
	}
	for ad.Next() {
		if ad.Type() == ctaFilter && k.refuseFilter {
			return []netlink.Message{errorReply(req, unix.EOPNOTSUPP)}
		}
	}
	var flags netlink.HeaderFlags = netlink.Multi
	if k.interruptions > 0 {
		k.interruptions--
		flags |= netlink.DumpInterrupted
	}
	var out []netlink.Message
	for _, f := range slices.Concat(k.table, k.ghosts) {
		if req.Data[0] != 0 && inet.Family(req.Data[0]) != f.Family() {
			continue
		}
		m := flowMessage(k.t, f)
		m.Header.Sequence, m.Header.Flags = req.Header.Sequence, flags
		out = append(out, m)
	}
	return append(out, netlink.Message{Header: netlink.Header{
		Type: netlink.Done, Flags: netlink.Multi, Sequence: req.Header.Sequence,
	}, Data: make([]byte, 4)})
}

func (k *fakeKernel) delete(req netlink.Message) {
	f, err := decodeFlow(req.Data)
	if err != nil {
		k.t.Fatal(err)
	}
	errno := k.deleteErrno
	i := slices.IndexFunc(k.table, func(e Flow) bool { return e.Orig == f.Orig && (f.ID == 0 || e.ID == f.ID) })
	switch {
	case errno != 0:
	case i < 0:
		errno = unix.ENOENT
	default:
		k.table = slices.Delete(k.table, i, i+1)
	}
	if errno != 0 || req.Header.Flags&netlink.Acknowledge != 0 {
		k.pending = append(k.pending, errorReply(req, errno))
	}
}

// errorReply is an NLMSG_ERROR for req; errno 0 makes it an ack.
func errorReply(req netlink.Message, errno unix.Errno) netlink.Message {
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	hdr, _ := (&netlink.Message{Header: req.Header}).MarshalBinary()
	data = append(data, hdr[:16]...)
	return netlink.Message{
		Header: netlink.Header{Type: netlink.Error, Sequence: req.Header.Sequence, Flags: netlink.HeaderFlags(0x100)},
		Data:   data,
	}
}

// flowMessage is the message a dump carries for f.
func flowMessage(t *testing.T, f Flow) netlink.Message {
	t.Helper()
	w := newWriter(f.Family())
	encodeTuple(w, ctaTupleOrig, f.Orig)
	reply := f.Reply
	if !reply.Src.IsValid() {
		reply = f.Orig.Reverse()
	}
	encodeTuple(w, ctaTupleReply, reply)
	if f.Zone != 0 {
		w.BE16(ctaZone, f.Zone)
	}
	w.BE32(ctaStatus, uint32(f.Status))
	w.BE32(ctaMark, f.Mark)
	w.BE32(ctaID, f.ID)
	w.BE32(ctaTimeout, 30)
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nl.NFType(subsysCTNetlink, msgNew)), Flags: netlink.Request},
		Data:   w.B,
	}
}
