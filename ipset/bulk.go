package ipset

import (
	"context"
	"errors"
	"slices"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// maxADT bounds the entries of one bulk message: IPSET_ATTR_ADT has a 16
// bit length.
const maxADT = 0xffff - 4

// AddEntries adds many entries to a set in few messages, many per write.
// Entries the kernel refuses are returned in a *BatchError naming each one;
// all others are added. See Mode for entries already there. Once the set
// is full (ErrSetFull), the entries after the one refused are not sent,
// one round trip each, to be refused in turn: they fail with ErrSetFull
// too, even one the set already holds, and a caller that makes room (a
// larger set, see Replace) adds them again.
func (c *Conn) AddEntries(ctx context.Context, name string, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "add", cmdAdd, Set{Name: name}, entries, mode == Exclusive)
}

// DeleteEntries removes many entries from a set in few messages. Entries
// the kernel refuses are returned in a *BatchError; with ExistOK a missing
// entry is not an error.
func (c *Conn) DeleteEntries(ctx context.Context, name string, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "delete", cmdDel, Set{Name: name}, entries, mode == Exclusive)
}

// AddEntriesTo is AddEntries for a caller that knows the set: it takes
// s's type and family as given (its other fields are not used), and so
// saves the request AddEntries makes first to learn them; with s.Type
// empty it makes that request too. The entries are encoded for s.Type; a
// set of another type under s.Name refuses them or reads them as its own
// type would.
func (c *Conn) AddEntriesTo(ctx context.Context, s Set, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "add", cmdAdd, s, entries, mode == Exclusive)
}

// DeleteEntriesFrom is DeleteEntries for a caller that knows the set, as
// AddEntriesTo is AddEntries'.
func (c *Conn) DeleteEntriesFrom(ctx context.Context, s Set, entries []Entry, mode Mode) error {
	return c.bulk(ctx, "delete", cmdDel, s, entries, mode == Exclusive)
}

// bulk runs op on s's entries, asking the kernel for s's type and family
// first when s has no type.
func (c *Conn) bulk(ctx context.Context, op string, cmd uint8, s Set, entries []Entry, exclusive bool) error {
	if err := checkName(op, s.Name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Type == "" {
		h, err := c.kind(ctx, s.Name)
		if err != nil {
			return err
		}
		s = h.Set
	}
	return c.bulkLocked(ctx, op, cmd, s.Type, s.family(), s.Name, entries, exclusive)
}

// chunk is one bulk request and the indexes of the entries it carries, in
// increasing order.
type chunk struct {
	req     *nl.Request
	indexes []int
}

func (c *Conn) bulkLocked(ctx context.Context, op string, cmd uint8, typ Type, fam inet.Family, name string, entries []Entry, exclusive bool) error {
	l, ok := typ.layout()
	if !ok {
		return &OpError{Op: op, Object: name, Err: typeError(typ)}
	}
	bulkErr := &BatchError{Total: len(entries)}
	pending := make([]int, 0, len(entries))
	for i, e := range entries {
		err := e.checkLayout(typ, l)
		if err == nil {
			err = e.checkFamily(fam)
		}
		if err != nil {
			bulkErr.Failed = append(bulkErr.Failed,
				&OpError{Op: op, Object: name + " " + e.String(), Index: i, Err: err, sentinel: ErrEntryInvalid})
			continue
		}
		pending = append(pending, i)
	}
	// The kernel stops a message at its first failed entry; the entries
	// after it go again in the next round.
	var err error
	for len(pending) > 0 && err == nil {
		pending, err = c.bulkRound(ctx, op, cmd, typ, name, entries, pending, exclusive, bulkErr)
	}
	if err != nil {
		var oerr *OpError
		if errors.As(err, &oerr) {
			return err
		}
		return opError(op, name, typ, err)
	}
	if len(bulkErr.Failed) > 0 {
		slices.SortFunc(bulkErr.Failed, func(a, b *OpError) int { return a.Index - b.Index })
		return bulkErr
	}
	return nil
}

// bulkRound sends the entries at pending in as few messages as fit and
// returns the entries to send again: those after a failed one in its
// message. The failed ones go into bulkErr.
func (c *Conn) bulkRound(ctx context.Context, op string, cmd uint8, typ Type, name string, entries []Entry, pending []int, exclusive bool, bulkErr *BatchError) ([]int, error) {
	chunks := packChunks(c.protocol, cmd, name, entries, pending, exclusive)
	reqs := make([]*nl.Request, len(chunks))
	for i := range chunks {
		reqs[i] = chunks[i].req
	}
	if err := c.nl.Exchange(ctx, reqs...); err != nil {
		return nil, err
	}
	var again []int
	for i, r := range reqs {
		if r.Err == nil {
			continue
		}
		var ke *nl.Error
		if !errors.As(r.Err, &ke) {
			return nil, r.Err
		}
		ch := chunks[i]
		lineno, _ := decodeLineNo(ke.Echo)
		pos, found := slices.BinarySearch(ch.indexes, int(lineno)-1)
		if lineno == 0 || !found {
			return nil, opError(op, name, typ, r.Err)
		}
		idx := ch.indexes[pos]
		oerr := opError(op, name+" "+entries[idx].String(), typ, r.Err).(*OpError)
		oerr.Index = idx
		bulkErr.Failed = append(bulkErr.Failed, oerr)
		rest := ch.indexes[pos+1:]
		if cmd == cmdAdd && errors.Is(oerr, ErrSetFull) {
			for _, j := range rest {
				full := *oerr
				full.Object, full.Index = name+" "+entries[j].String(), j
				bulkErr.Failed = append(bulkErr.Failed, &full)
			}
			continue
		}
		again = append(again, rest...)
	}
	return again, nil
}

// packChunks encodes the entries at indexes into messages of as many
// entries as fit. An entry's line number is its index plus one.
func packChunks(protocol, cmd uint8, name string, entries []Entry, indexes []int, exclusive bool) []chunk {
	var chunks []chunk
	adt := make([]byte, 0, maxADT)
	var attr nl.Writer
	start := 0
	flush := func(end int) {
		r := encodeBulk(protocol, cmd, name, uint32(indexes[start]+1), adt, exclusive)
		chunks = append(chunks, chunk{req: r, indexes: indexes[start:end]})
		adt = adt[:0]
		start = end
	}
	for i, idx := range indexes {
		attr.B = attr.B[:0]
		writeEntryAttr(&attr, entries[idx], uint32(idx+1))
		if len(adt)+len(attr.B) > maxADT {
			flush(i)
		}
		adt = append(adt, attr.B...)
	}
	if len(adt) > 0 {
		flush(len(indexes))
	}
	return chunks
}
