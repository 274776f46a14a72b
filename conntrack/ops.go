package conntrack

import (
	"context"
	"errors"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Get returns the entry whose original tuple is key.Orig in zone key.Zone.
func (c *Conn) Get(ctx context.Context, key Flow) (Flow, error) {
	obj := key.Orig.String()
	req, err := encodeLookup(msgGet, key.Orig, key.Zone, 0, true)
	if err != nil {
		return Flow{}, opError("get", obj, err)
	}
	msgs, err := c.exchange(ctx, req)
	if err == nil && len(msgs) == 0 {
		err = errors.New("no entry in the kernel's reply")
	}
	if err != nil {
		return Flow{}, opError("get", obj, err)
	}
	fl, err := decodeFlow(msgs[0].Data)
	return fl, opError("get", obj, err)
}

// Create adds entries, many per write; for tests and tools, since the
// kernel makes entries from traffic. A zero Reply stands for the reversed
// Orig. The kernel creates each entry on its own; Create returns the first
// refusal (ErrFlowExist for a duplicate).
func (c *Conn) Create(ctx context.Context, flows ...Flow) error {
	if len(flows) == 0 {
		return nil
	}
	reqs := make([]*nl.Request, len(flows))
	for i, f := range flows {
		r, err := encodeNew(f, false)
		if err != nil {
			return &OpError{Op: "create", Object: f.Orig.String(), Index: i, Err: err}
		}
		reqs[i] = r
	}
	if err := c.nl.Exchange(ctx, reqs...); err != nil {
		return opError("create", flows[0].Orig.String(), err)
	}
	for i, r := range reqs {
		if r.Err != nil {
			oe := opError("create", flows[i].Orig.String(), r.Err).(*OpError)
			oe.Index = i
			return oe
		}
	}
	return nil
}

// Delete removes the entry whose original tuple is f.Orig in zone f.Zone;
// when f.ID is set, only if the entry is still that incarnation. A missing
// entry is ErrFlowNotExist.
func (c *Conn) Delete(ctx context.Context, f Flow) error {
	obj := f.Orig.String()
	req, err := encodeLookup(msgDelete, f.Orig, f.Zone, f.ID, true)
	if err != nil {
		return opError("delete", obj, err)
	}
	_, err = c.exchange(ctx, req)
	return opError("delete", obj, err)
}

// Flush removes every entry of family; 0 means both families.
func (c *Conn) Flush(ctx context.Context, family inet.Family) error {
	obj := "family " + family.String()
	_, err := c.exchange(ctx, encodeFlush(family))
	return opError("flush", obj, err)
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
// that vanish in between are not errors and not counted. Only All()
// selects every entry (Flush does that in one message); a Filter with no
// field set is an error, not everything.
func (c *Conn) DeleteMatching(ctx context.Context, f Filter) (int, error) {
	return c.DeleteFunc(ctx, f, nil)
}

// DeleteFunc is DeleteMatching for a selection a Filter cannot express:
// of the entries f selects, it removes those for which del returns true
// (all of them when del is nil). The kernel filters what f says, del
// sees the rest as the dump streams in, and only the entries to delete
// are kept, so a reconciliation that keeps most of a large table costs
// one filtered dump and the deletes.
func (c *Conn) DeleteFunc(ctx context.Context, f Filter, del func(*Flow) bool) (int, error) {
	fp, err := f.selection("delete")
	if err != nil {
		return 0, err
	}
	var victims []victim
	err = c.dumpOp(ctx, "delete", fp, func() { victims = victims[:0] }, func(fl *Flow) {
		if del == nil || del(fl) {
			victims = append(victims, victim{orig: fl.Orig, zone: fl.Zone, id: fl.ID})
		}
	})
	if err != nil {
		return 0, err
	}
	if len(victims) == 0 {
		return 0, nil
	}
	reqs := make([]*nl.Request, len(victims))
	for i, v := range victims {
		r, err := encodeLookup(msgDelete, v.orig, v.zone, v.id, false)
		if err != nil {
			return 0, opError("delete", v.orig.String(), err)
		}
		reqs[i] = r
	}
	if err := c.nl.Exchange(ctx, reqs...); err != nil {
		return 0, opError("delete", f.String(), err)
	}
	deleted := 0
	var firstErr error
	for i, r := range reqs {
		switch {
		case r.Err == nil:
			deleted++
		case !errors.Is(r.Err, unix.ENOENT) && firstErr == nil:
			firstErr = opError("delete", victims[i].orig.String(), r.Err)
		}
	}
	return deleted, firstErr
}
