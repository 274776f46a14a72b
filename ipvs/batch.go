package ipvs

import (
	"context"
	"slices"

	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Batch is a list of changes to send together with Conn.Apply. Fill it,
// then apply it; the zero value is an empty batch. A Batch is not safe for
// concurrent use while being filled.
//
// Each change is encoded as it is added: a batch holds its requests as the
// kernel will read them, not the values they came from, so a batch of
// 100,000 destinations costs their bytes and no second copy.
type Batch struct {
	// w holds the requests' payloads back to back, each a generic netlink
	// header and attributes.
	w nl.Writer
	// reqs are the operations in order, each with the end of its payload
	// in w.
	reqs []batchRequest
	// invalid are the operations that failed validation when added, in
	// order; they have no payload.
	invalid []*OpError
	// keyed is the service the last destination request named, and
	// keyStart and keyEnd where its service attribute lies in w: the
	// next destination of the same service copies it.
	keyed            Service
	keyStart, keyEnd int
}

// batchRequest is one operation of a Batch.
type batchRequest struct {
	kind opKind
	end  uint32
}

// requestSize is the payload of a request that creates or updates a
// destination, the largest of the common ones (a service's is 88 bytes),
// for Grow: room a little too large costs less than a buffer that
// doubles at its end.
const requestSize = 148

// Len returns the number of operations in the batch.
func (b *Batch) Len() int { return len(b.reqs) }

// Grow makes room for n more operations, so a batch whose size is known
// is filled without growing step by step.
func (b *Batch) Grow(n int) {
	b.reqs = slices.Grow(b.reqs, n)
	b.w.B = slices.Grow(b.w.B, n*requestSize)
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.w.B, b.reqs, b.invalid = b.w.B[:0], b.reqs[:0], nil
	b.keyStart, b.keyEnd = 0, 0
}

// CreateService adds the creation of s.
func (b *Batch) CreateService(s Service) { b.add(op{kind: opCreateService, svc: s}) }

// UpdateService adds setting s's scheduler, flags and persistence.
func (b *Batch) UpdateService(s Service) { b.add(op{kind: opUpdateService, svc: s}) }

// DeleteService adds the deletion of s and its destinations.
func (b *Batch) DeleteService(s Service) { b.add(op{kind: opDeleteService, svc: s}) }

// CreateDestination adds d to service s.
func (b *Batch) CreateDestination(s Service, d Destination) {
	b.add(op{kind: opCreateDestination, svc: s, dest: d})
}

// UpdateDestination adds setting d's forwarding, weight and thresholds.
func (b *Batch) UpdateDestination(s Service, d Destination) {
	b.add(op{kind: opUpdateDestination, svc: s, dest: d})
}

// DeleteDestination adds removing d from service s.
func (b *Batch) DeleteDestination(s Service, d Destination) {
	b.add(op{kind: opDeleteDestination, svc: s, dest: d})
}

// Flush adds the deletion of every service.
func (b *Batch) Flush() { b.add(op{kind: opFlush}) }

// add validates o and encodes it, or keeps its validation error.
func (b *Batch) add(o op) {
	if err := o.validate(); err != nil {
		b.invalid = append(b.invalid, o.opError(len(b.reqs), err))
	} else {
		b.w.B = nl.AppendGenlHeader(b.w.B, o.command(), genlVersion)
		b.encode(o)
	}
	b.reqs = append(b.reqs, batchRequest{kind: o.kind, end: uint32(len(b.w.B))})
}

// encode writes o's attributes. A destination's service goes as its key
// alone, the same bytes for all the destinations of one service: those of
// the destination before, when it named the same service, are copied.
func (b *Batch) encode(o op) {
	if !o.hasDestination() {
		o.encode(&b.w)
		return
	}
	start := len(b.w.B)
	if b.keyEnd > b.keyStart && sameServiceKey(o.svc, b.keyed) {
		b.w.B = append(b.w.B, b.w.B[b.keyStart:b.keyEnd]...)
	} else {
		o.encodeService(&b.w)
	}
	b.keyed, b.keyStart, b.keyEnd = o.svc, start, len(b.w.B)
	o.encodeRest(&b.w)
}

// sameServiceKey reports whether a and b name the same service in a
// request, as Service.encode writes its key.
func sameServiceKey(a, b Service) bool {
	if a.family() != b.family() || a.FirewallMark != b.FirewallMark {
		return false
	}
	return a.FirewallMark != 0 || (a.Protocol == b.Protocol && a.Addr == b.Addr && a.Port == b.Port)
}

// payload returns request i's bytes, which start where the one before
// it ends.
func (b *Batch) payload(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = b.reqs[i-1].end
	}
	end := b.reqs[i].end
	return b.w.B[start:end:end]
}

// opError turns request i's failure into its error, naming its object
// from the request's own attributes.
func (b *Batch) opError(i int, err error) *OpError {
	o := op{kind: b.reqs[i].kind}
	attrs := b.payload(i)[nl.GenlHeaderLen:]
	if svc, derr := nested(attrs, cmdAttrService, "request"); derr == nil {
		o.svc, _ = decodeService(svc)
	}
	if dest, derr := nested(attrs, cmdAttrDest, "request"); derr == nil {
		o.dest, _ = decodeDestination(dest, o.svc.family())
	}
	return o.opError(i, err)
}

// Apply sends the batch's operations in order, as many to a write as the
// socket buffers allow, and waits until the kernel has answered every one.
// The kernel applies each operation on its own: one failing does not stop
// the others. If any failed, Apply returns a *BatchError listing each
// failure as an *OpError with its Index in the batch; errors.Is matches
// the sentinels and errnos of all of them. If ctx ends or the socket
// fails midway, the operations whose outcome is unknown fail with that
// error (the context's, or unix.ENOBUFS if the kernel dropped replies).
func (c *Conn) Apply(ctx context.Context, b *Batch) error {
	if b.Len() == 0 {
		return ctx.Err()
	}
	return c.apply(ctx, b, true)
}

// applyWindow is how many of a batch's requests are handed to the socket
// at a time: a few writes' worth, so that the requests' bookkeeping takes
// a window's memory, not the batch's.
const applyWindow = 8192

// window is the bookkeeping of the requests handed to the socket at once:
// each request, a pointer to it for Exchange, and its index in the batch.
type window struct {
	reqs  []nl.Request
	ptrs  []*nl.Request
	index []int
}

// getWindow returns a window for up to n requests.
func (c *Conn) getWindow(n int) *window {
	w, _ := c.windows.Get().(*window)
	if w == nil || cap(w.reqs) < n {
		w = &window{reqs: make([]nl.Request, n), ptrs: make([]*nl.Request, n), index: make([]int, n)}
	}
	w.reqs, w.ptrs, w.index = w.reqs[:n], w.ptrs[:n], w.index[:n]
	return w
}

// putWindow keeps w for the next call, without the requests' payloads:
// they belong to the batch.
func (c *Conn) putWindow(w *window) {
	clear(w.reqs)
	c.windows.Put(w)
}

// apply runs b's operations; asBatch selects a *BatchError over the single
// operation's *OpError.
func (c *Conn) apply(ctx context.Context, b *Batch, asBatch bool) error {
	failed := slices.Clone(b.invalid)
	win := c.getWindow(min(applyWindow, len(b.reqs)))
	defer c.putWindow(win)
	reqs := win.reqs
	var broke error
	for i, invalid := 0, 0; i < len(b.reqs); {
		// Fill the window with the next valid requests.
		n := 0
		for ; i < len(b.reqs) && n < len(reqs); i++ {
			if invalid < len(b.invalid) && b.invalid[invalid].Index == i {
				invalid++
				continue
			}
			reqs[n] = nl.Request{Type: c.family, Flags: reqChange, Data: b.payload(i)}
			win.ptrs[n], win.index[n] = &reqs[n], i
			n++
		}
		if n == 0 {
			break
		}
		if broke == nil {
			broke = c.nl.Exchange(ctx, win.ptrs[:n]...)
		} else {
			// Once the socket failed or ctx ended, the rest is not sent.
			for j := range reqs[:n] {
				reqs[j].Err = broke
			}
		}
		for j, r := range reqs[:n] {
			if r.Err != nil {
				failed = append(failed, b.opError(win.index[j], r.Err))
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if !asBatch {
		return failed[0]
	}
	// Validation failures were found first; put them in batch order.
	slices.SortStableFunc(failed, func(a, b *OpError) int { return a.Index - b.Index })
	return &BatchError{Failed: failed, Total: b.Len()}
}
