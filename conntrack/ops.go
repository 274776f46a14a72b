package conntrack

import (
	"context"
	"errors"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Get returns the entry whose original tuple is key.Orig in zone key.Zone.
func (c *Conn) Get(ctx context.Context, key Flow) (Flow, error) {
	obj := key.Orig.String()
	req, err := encodeLookup(msgGet, key.Orig, key.Zone, 0, true)
	if err != nil {
		return Flow{}, opError("get", obj, err)
	}
	done, err := c.begin(ctx)
	if err != nil {
		return Flow{}, opError("get", obj, err)
	}
	defer done()
	msgs, err := c.exchange(req)
	if err == nil && len(msgs) == 0 {
		err = errors.New("no entry in the kernel's reply")
	}
	if err != nil {
		return Flow{}, opError("get", obj, ctxErr(ctx, err))
	}
	fl, err := decodeFlow(msgs[0].Data)
	return fl, opError("get", obj, err)
}

// Create adds entries, many per write; for tests and tools, since the
// kernel makes entries from traffic. A zero Reply stands for the reversed
// Orig. It stops at the first batch the kernel refuses part of and returns
// the first refusal (ErrExist for a duplicate).
func (c *Conn) Create(ctx context.Context, flows ...Flow) error {
	if len(flows) == 0 {
		return nil
	}
	done, err := c.begin(ctx)
	if err != nil {
		return opError("create", flows[0].Orig.String(), err)
	}
	defer done()
	msgs := make([]netlink.Message, 0, batchSize)
	for start := 0; start < len(flows); start += batchSize {
		chunk := flows[start:min(start+batchSize, len(flows))]
		msgs = msgs[:0]
		for _, f := range chunk {
			m, err := encodeNew(f, false)
			if err != nil {
				return opError("create", f.Orig.String(), err)
			}
			msgs = append(msgs, m)
		}
		rejected, err := c.sendBatch(msgs)
		if err != nil {
			return opError("create", chunk[0].Orig.String(), ctxErr(ctx, err))
		}
		if len(rejected) > 0 {
			r := rejected[0]
			return opError("create", chunk[r.index].Orig.String(), r.err)
		}
	}
	return nil
}

// Delete removes the entry whose original tuple is f.Orig in zone f.Zone;
// when f.ID is set, only if the entry is still that incarnation. A missing
// entry is ErrNotExist.
func (c *Conn) Delete(ctx context.Context, f Flow) error {
	obj := f.Orig.String()
	req, err := encodeLookup(msgDelete, f.Orig, f.Zone, f.ID, true)
	if err != nil {
		return opError("delete", obj, err)
	}
	done, err := c.begin(ctx)
	if err != nil {
		return opError("delete", obj, err)
	}
	defer done()
	_, err = c.exchange(req)
	return opError("delete", obj, ctxErr(ctx, err))
}

// Flush removes every entry of family; 0 means both families.
func (c *Conn) Flush(ctx context.Context, family Family) error {
	obj := "family " + family.String()
	done, err := c.begin(ctx)
	if err != nil {
		return opError("flush", obj, err)
	}
	defer done()
	_, err = c.exchange(encodeFlush(family))
	return opError("flush", obj, ctxErr(ctx, err))
}

// victim is what a delete needs of a dumped entry.
type victim struct {
	orig Tuple
	zone uint16
	id   uint32
}

// DeleteMatching removes the entries f selects and returns how many it
// removed. It dumps with as much of f as the kernel filters, checks the rest
// here, then deletes the matches many per write over the same socket, each
// by tuple and ID so a newer entry with a reused tuple survives. Entries
// that vanish in between are not errors and not counted. A nil f selects
// every entry; Flush does that in one message.
func (c *Conn) DeleteMatching(ctx context.Context, f *Filter) (int, error) {
	var victims []victim
	err := c.dumpOp(ctx, "delete", f, func() { victims = victims[:0] }, func(fl *Flow) {
		victims = append(victims, victim{orig: fl.Orig, zone: fl.Zone, id: fl.ID})
	})
	if err != nil {
		return 0, err
	}
	if len(victims) == 0 {
		return 0, nil
	}
	done, err := c.begin(ctx)
	if err != nil {
		return 0, opError("delete", f.String(), err)
	}
	defer done()
	deleted := 0
	var firstErr error
	msgs := make([]netlink.Message, 0, batchSize)
	for start := 0; start < len(victims); start += batchSize {
		chunk := victims[start:min(start+batchSize, len(victims))]
		msgs = msgs[:0]
		for _, v := range chunk {
			m, err := encodeLookup(msgDelete, v.orig, v.zone, v.id, false)
			if err != nil {
				return deleted, opError("delete", v.orig.String(), err)
			}
			msgs = append(msgs, m)
		}
		rejected, err := c.sendBatch(msgs)
		if err != nil {
			return deleted, opError("delete", f.String(), ctxErr(ctx, err))
		}
		deleted += len(chunk) - len(rejected)
		for _, r := range rejected {
			if !errors.Is(r.err, unix.ENOENT) && firstErr == nil {
				firstErr = opError("delete", chunk[r.index].orig.String(), r.err)
			}
		}
	}
	return deleted, firstErr
}
