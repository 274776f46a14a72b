package ipset

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// maxADT bounds the entries of one bulk message: IPSET_ATTR_ADT has a 16
// bit length.
const maxADT = 0xffff - 4

// AddEntries adds many entries to a set in few messages, many per write.
// Entries the kernel refuses are returned in a *BulkError naming each one;
// all others are added. See Mode for entries already there.
func (c *Conn) AddEntries(ctx context.Context, name string, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "add", cmdAdd, name, entries, mode == Exclusive)
}

// DeleteEntries removes many entries from a set in few messages. Entries
// the kernel refuses are returned in a *BulkError; with ExistOK a missing
// entry is not an error.
func (c *Conn) DeleteEntries(ctx context.Context, name string, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "delete", cmdDel, name, entries, mode == Exclusive)
}

func (c *Conn) bulk(ctx context.Context, op string, cmd uint8, name string, entries []Entry, exclusive bool) error {
	if err := checkName(op, name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.kind(ctx, name)
	if err != nil {
		return err
	}
	return c.bulkLocked(ctx, op, cmd, h.Type, h.family(), name, entries, exclusive)
}

// chunk is one bulk message and the indexes of the entries it carries, in
// increasing order.
type chunk struct {
	msg     netlink.Message
	indexes []int
}

// reply is the kernel's answer to one message: an errno, and for a bulk
// message that failed, the line number of the entry that failed.
type reply struct {
	errno  unix.Errno
	lineno uint32
}

func (c *Conn) bulkLocked(ctx context.Context, op string, cmd uint8, typ Type, fam Family, name string, entries []Entry, exclusive bool) error {
	l, ok := typ.layout()
	if !ok {
		return &OpError{Op: op, Set: name, Err: fmt.Errorf("set type %q: %w", typ, ErrTypeNotSupported)}
	}
	bulkErr := &BulkError{Op: op, Set: name}
	pending := make([]int, 0, len(entries))
	for i, e := range entries {
		err := e.checkLayout(typ, l)
		if err == nil {
			err = e.checkFamily(fam)
		}
		if err != nil {
			bulkErr.Entries = append(bulkErr.Entries, &EntryError{Index: i, Entry: e,
				Err: &OpError{Op: op, Set: name, Entry: e.String(), Err: err, sentinel: ErrInvalidEntry}})
			continue
		}
		pending = append(pending, i)
	}
	err := c.withContext(ctx, func() error {
		// The kernel stops a message at its first failed entry; the
		// entries after it go again in the next round.
		for len(pending) > 0 {
			chunks, err := packChunks(c.protocol, cmd, name, entries, pending, exclusive)
			if err != nil {
				return err
			}
			pending = pending[:0:0]
			for len(chunks) > 0 {
				n := writeCount(chunks, c.writeLimit)
				replies, err := c.roundTrip(chunks[:n])
				if err != nil {
					return err
				}
				for i, r := range replies {
					if r.errno == 0 {
						continue
					}
					ch := chunks[i]
					pos, found := slices.BinarySearch(ch.indexes, int(r.lineno)-1)
					if r.lineno == 0 || !found {
						return opError(op, name, typ, r.errno)
					}
					idx := ch.indexes[pos]
					oerr := opError(op, name, typ, r.errno).(*OpError)
					oerr.Entry = entries[idx].String()
					bulkErr.Entries = append(bulkErr.Entries, &EntryError{Index: idx, Entry: entries[idx], Err: oerr})
					pending = append(pending, ch.indexes[pos+1:]...)
				}
				chunks = chunks[n:]
			}
		}
		return nil
	})
	if err != nil {
		var oerr *OpError
		if errors.As(err, &oerr) {
			return err
		}
		return opError(op, name, typ, err)
	}
	if len(bulkErr.Entries) > 0 {
		slices.SortFunc(bulkErr.Entries, func(a, b *EntryError) int { return a.Index - b.Index })
		return bulkErr
	}
	return nil
}

// packChunks encodes the entries at indexes into messages of as many
// entries as fit. An entry's line number is its index plus one.
func packChunks(protocol, cmd uint8, name string, entries []Entry, indexes []int, exclusive bool) ([]chunk, error) {
	var chunks []chunk
	adt := make([]byte, 0, maxADT)
	var attr []byte
	start := 0
	flush := func(end int) error {
		m, err := encodeBulk(protocol, cmd, name, uint32(indexes[start]+1), adt, exclusive)
		if err != nil {
			return err
		}
		chunks = append(chunks, chunk{msg: m, indexes: indexes[start:end]})
		adt = adt[:0]
		start = end
		return nil
	}
	for i, idx := range indexes {
		attr = appendEntryAttr(attr[:0], entries[idx], uint32(idx+1))
		if len(adt)+len(attr) > maxADT {
			if err := flush(i); err != nil {
				return nil, err
			}
		}
		adt = append(adt, attr...)
	}
	if len(adt) > 0 {
		if err := flush(len(indexes)); err != nil {
			return nil, err
		}
	}
	return chunks, nil
}

// writeCount says how many of chunks fit in one write; at least one.
func writeCount(chunks []chunk, limit int) int {
	size := 0
	for i, ch := range chunks {
		size += nlmsgHeaderLen + len(ch.msg.Data)
		if i > 0 && size > limit {
			return i
		}
	}
	return len(chunks)
}

const nlmsgHeaderLen = 16

// roundTrip sends messages in one write and collects one reply for each:
// an acknowledgement, or an error. It reads the socket itself because the
// error for a bulk message carries the failed entry's line number, which
// the netlink package's receive path does not return.
//
// A message the fault hook fails is not sent, nor are those after it; its
// reply carries the hook's errno and ends the replies.
func (c *Conn) roundTrip(chunks []chunk) ([]reply, error) {
	for i := range chunks {
		err := c.injectFault(chunks[i].msg)
		if err == nil {
			continue
		}
		var errno unix.Errno
		if !errors.As(err, &errno) {
			return nil, err
		}
		var replies []reply
		if i > 0 {
			if replies, err = c.sendChunks(chunks[:i]); err != nil {
				return nil, err
			}
		}
		return append(replies, reply{errno: errno}), nil
	}
	return c.sendChunks(chunks)
}

func (c *Conn) sendChunks(chunks []chunk) ([]reply, error) {
	msgs := make([]netlink.Message, len(chunks))
	for i := range chunks {
		msgs[i] = chunks[i].msg
	}
	sent, err := c.nl.SendMessages(msgs)
	if err != nil {
		return nil, err
	}
	first := sent[0].Header.Sequence
	replies := make([]reply, len(sent))
	answered := make([]bool, len(sent))
	left := len(sent)
	for left > 0 {
		b, err := c.recvRaw()
		if err != nil {
			return nil, err
		}
		for len(b) >= nlmsgHeaderLen {
			mlen := int(nativeUint32(b))
			if mlen < nlmsgHeaderLen || mlen > len(b) {
				return nil, errors.New("malformed netlink reply")
			}
			typ := binary.NativeEndian.Uint16(b[4:6])
			seq := binary.NativeEndian.Uint32(b[8:12])
			payload := b[nlmsgHeaderLen:mlen]
			b = b[min(nlmsgAlign(mlen), len(b)):]
			// Replies to requests a cancelled call left behind have
			// other sequence numbers.
			i := int(seq - first)
			if typ != uint16(netlink.Error) || i >= len(sent) || answered[i] || len(payload) < 4 {
				continue
			}
			answered[i] = true
			left--
			if code := int32(binary.NativeEndian.Uint32(payload[0:4])); code < 0 {
				replies[i].errno = unix.Errno(-code)
				replies[i].lineno, _ = decodeLineNo(payload)
			}
		}
	}
	return replies, nil
}

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// nativeUint32 reads a netlink header's length, in host byte order.
func nativeUint32(b []byte) uint32 { return binary.NativeEndian.Uint32(b[0:4]) }

// recvRaw reads one datagram, waiting under the socket's deadline.
func (c *Conn) recvRaw() ([]byte, error) {
	rc, err := c.nl.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), c.recvBuf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if n > len(c.recvBuf) {
		return nil, errors.New("netlink reply larger than the receive buffer")
	}
	return c.recvBuf[:n], nil
}
