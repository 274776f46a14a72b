package ipvs

import (
	"context"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"slices"
)

// Batch is a list of changes to send together with Conn.Apply. Fill it,
// then apply it; the zero value is an empty batch. A Batch is not safe for
// concurrent use while being filled.
type Batch struct {
	ops []op
}

// Len returns the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Grow makes room for n more operations, so a batch whose size is known
// is filled without growing step by step.
func (b *Batch) Grow(n int) { b.ops = slices.Grow(b.ops, n) }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() { b.ops = b.ops[:0] }

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

func (b *Batch) add(o op) { b.ops = append(b.ops, o) }

// Apply sends the batch's operations in order, as many to a write as the
// socket buffers allow, and waits until the kernel has answered every one.
// The kernel applies each operation on its own: one failing does not stop
// the others. If any failed, Apply returns a *BatchError listing each
// failure as an *OpError with its Index in the batch; errors.Is matches
// the sentinels and errnos of all of them. If ctx ends or the socket
// fails midway, the operations whose outcome is unknown fail with that
// error (the context's, or unix.ENOBUFS if the kernel dropped replies).
func (c *Conn) Apply(ctx context.Context, b *Batch) error {
	if len(b.ops) == 0 {
		return ctx.Err()
	}
	return c.apply(ctx, b.ops, true)
}

// apply runs ops; asBatch selects a *BatchError over the single op's
// *OpError.
func (c *Conn) apply(ctx context.Context, ops []op, asBatch bool) error {
	var (
		failed []*OpError
		reqs   = make([]nl.Request, 0, len(ops))
		index  = make([]int, 0, len(ops))
		ends   = make([]int, 0, len(ops))
		w      = nl.Writer{B: make([]byte, 0, 160*len(ops))}
	)
	// All requests' attributes go into one buffer, sliced once it stops
	// growing.
	for i, o := range ops {
		if err := o.validate(); err != nil {
			failed = append(failed, o.opError(i, err))
			continue
		}
		w.B = nl.AppendGenlHeader(w.B, o.command(), genlVersion)
		o.encode(&w)
		reqs = append(reqs, nl.Request{Type: c.family, Flags: reqChange})
		index = append(index, i)
		ends = append(ends, len(w.B))
	}
	ptrs := make([]*nl.Request, len(reqs))
	start := 0
	for j := range reqs {
		reqs[j].Data = w.B[start:ends[j]:ends[j]]
		start = ends[j]
		ptrs[j] = &reqs[j]
	}
	if len(ptrs) > 0 {
		_ = c.nl.Exchange(ctx, ptrs...)
	}
	for j, r := range reqs {
		if r.Err != nil {
			failed = append(failed, ops[index[j]].opError(index[j], r.Err))
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
	return &BatchError{Failed: failed, Total: len(ops)}
}
