package conntrack

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// maxDumpAttempts bounds the restarts of a dump the kernel marked
// inconsistent (NLM_F_DUMP_INTR).
const maxDumpAttempts = 5

// Dump returns the entries that f selects; All() selects every entry.
func (c *Conn) Dump(ctx context.Context, f Filter) ([]Flow, error) {
	fp, err := f.selection("dump")
	if err != nil {
		return nil, err
	}
	var flows []Flow
	err = c.dumpOp(ctx, "dump", fp, func() { flows = flows[:0] }, func(fl *Flow) {
		flows = append(flows, *fl)
	})
	if err != nil {
		return nil, err
	}
	return flows, nil
}

// Count returns the number of entries that f selects. For All() it asks
// the kernel for the size of the namespace's table without a dump.
func (c *Conn) Count(ctx context.Context, f Filter) (int, error) {
	fp, err := f.selection("count")
	if err != nil {
		return 0, err
	}
	if fp == nil {
		return c.countAll(ctx)
	}
	n := 0
	err = c.dumpOp(ctx, "count", fp, func() { n = 0 }, func(*Flow) { n++ })
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (c *Conn) countAll(ctx context.Context) (int, error) {
	msgs, err := c.exchange(ctx, encodeStats())
	if err == nil && len(msgs) == 0 {
		err = errors.New("no statistics in the kernel's reply")
	}
	if err != nil {
		return 0, opError("count", "all entries", err)
	}
	n, err := decodeStatsEntries(msgs[0].Data)
	return n, opError("count", "all entries", err)
}

func (c *Conn) dumpOp(ctx context.Context, op string, f *Filter, reset func(), fn func(*Flow)) error {
	if f != nil {
		if err := f.validate(); err != nil {
			return opError(op, describe(f), err)
		}
	}
	return opError(op, describe(f), c.walk(ctx, f, reset, fn))
}

// walk calls fn for every entry f selects. When the kernel reports the dump
// interrupted, it calls reset and starts again.
func (c *Conn) walk(ctx context.Context, f *Filter, reset func(), fn func(*Flow)) error {
	for range maxDumpAttempts {
		reset()
		interrupted := false
		for _, fam := range f.families() {
			intr, err := c.walkFamily(ctx, fam, f, fn)
			if err != nil {
				return err
			}
			interrupted = interrupted || intr
		}
		if !interrupted {
			return nil
		}
	}
	return ErrDumpInterrupted
}

// walkFamily runs one dump, stepping the Conn's filter level down while the
// kernel refuses the request as unsupported or invalid.
func (c *Conn) walkFamily(ctx context.Context, fam inet.Family, f *Filter, fn func(*Flow)) (interrupted bool, err error) {
	for {
		level := kernelLevel(c.level.Load())
		req, err := f.dumpRequest(fam, level)
		if err != nil {
			return false, err
		}
		interrupted, started, err := c.runDump(ctx, req, f, fn)
		if err != nil && !started && level > levelFamily &&
			(errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
			c.level.CompareAndSwap(int32(level), int32(level-1))
			continue
		}
		return interrupted, err
	}
}

// runDump sends one dump request and streams its entries through the Go
// side of the filter as they arrive, so memory does not grow with the
// table. started reports whether any entry arrived before an error.
func (c *Conn) runDump(ctx context.Context, r *nl.Request, f *Filter, fn func(*Flow)) (interrupted, started bool, err error) {
	var decodeErr error
	r.Handle = func(m netlink.Message) {
		started = true
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			interrupted = true
		}
		if m.Header.Type != netlink.HeaderType(nl.NFType(subsysCTNetlink, msgNew)) {
			return
		}
		fl, err := decodeFlow(m.Data)
		if err != nil {
			// Keep reading: the rest of the dump must leave the socket.
			if decodeErr == nil {
				decodeErr = fmt.Errorf("decoding an entry: %w", err)
			}
			return
		}
		if f == nil || f.Match(&fl) {
			fn(&fl)
		}
	}
	if err := c.nl.Exchange(ctx, r); err != nil {
		return interrupted, started, err
	}
	if r.Err != nil {
		return interrupted, started, r.Err
	}
	return interrupted, started, decodeErr
}
