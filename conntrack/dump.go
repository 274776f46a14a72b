package conntrack

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// maxDumpAttempts bounds the restarts of a dump the kernel marked
// inconsistent (NLM_F_DUMP_INTR).
const maxDumpAttempts = 5

// Dump returns the entries that f selects; a nil f selects all of them.
func (c *Conn) Dump(ctx context.Context, f *Filter) ([]Flow, error) {
	var flows []Flow
	err := c.dumpOp(ctx, "dump", f, func() { flows = flows[:0] }, func(fl *Flow) {
		flows = append(flows, *fl)
	})
	if err != nil {
		return nil, err
	}
	return flows, nil
}

// Count returns the number of entries that f selects. A nil f asks the
// kernel for the size of the namespace's table without a dump.
func (c *Conn) Count(ctx context.Context, f *Filter) (int, error) {
	if f == nil {
		return c.countAll(ctx)
	}
	n := 0
	err := c.dumpOp(ctx, "count", f, func() { n = 0 }, func(*Flow) { n++ })
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (c *Conn) countAll(ctx context.Context) (int, error) {
	done, err := c.begin(ctx)
	if err != nil {
		return 0, opError("count", "all entries", err)
	}
	defer done()
	msgs, err := c.exchange(encodeStats())
	if err == nil && len(msgs) == 0 {
		err = errors.New("no statistics in the kernel's reply")
	}
	if err != nil {
		return 0, opError("count", "all entries", ctxErr(ctx, err))
	}
	n, err := decodeStatsEntries(msgs[0].Data)
	return n, opError("count", "all entries", err)
}

func (c *Conn) dumpOp(ctx context.Context, op string, f *Filter, reset func(), fn func(*Flow)) error {
	if f != nil {
		if err := f.validate(); err != nil {
			return opError(op, f.String(), err)
		}
	}
	done, err := c.begin(ctx)
	if err != nil {
		return opError(op, f.String(), err)
	}
	defer done()
	return opError(op, f.String(), ctxErr(ctx, c.walk(f, reset, fn)))
}

// walk calls fn for every entry f selects. When the kernel reports the dump
// interrupted, it calls reset and starts again. The caller holds the socket.
func (c *Conn) walk(f *Filter, reset func(), fn func(*Flow)) error {
	for range maxDumpAttempts {
		reset()
		interrupted := false
		for _, fam := range f.families() {
			intr, err := c.walkFamily(fam, f, fn)
			if err != nil {
				return err
			}
			interrupted = interrupted || intr
		}
		if !interrupted {
			return nil
		}
	}
	return ErrInterrupted
}

// walkFamily runs one dump, stepping the Conn's filter level down while the
// kernel refuses the request as unsupported or invalid.
func (c *Conn) walkFamily(fam Family, f *Filter, fn func(*Flow)) (interrupted bool, err error) {
	for {
		level := kernelLevel(c.level.Load())
		req, err := f.dumpRequest(fam, level)
		if err != nil {
			return false, err
		}
		interrupted, started, err := c.runDump(req, f, fn)
		if err != nil && !started && level > levelFamily &&
			(errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
			c.level.CompareAndSwap(int32(level), int32(level-1))
			continue
		}
		return interrupted, err
	}
}

// runDump sends one dump request and streams its entries through the Go
// side of the filter, one datagram at a time, so memory does not grow with
// the table. started reports whether any entry arrived before an error.
func (c *Conn) runDump(req netlink.Message, f *Filter, fn func(*Flow)) (interrupted, started bool, err error) {
	if err := c.injectFault(req); err != nil {
		return false, false, err
	}
	sent, err := c.nl.Send(req)
	if err != nil {
		return false, false, err
	}
	var decodeErr error
	for m, err := range c.nl.ReceiveIter() {
		if err != nil {
			return interrupted, started, err
		}
		if m.Header.Sequence != sent.Header.Sequence {
			continue
		}
		started = true
		if m.Header.Flags&netlink.DumpInterrupted != 0 {
			interrupted = true
		}
		if m.Header.Type != netlink.HeaderType(subsysCTNetlink<<8|msgNew) {
			continue
		}
		fl, err := decodeFlow(m.Data)
		if err != nil {
			// Keep reading: the rest of the dump must leave the socket.
			if decodeErr == nil {
				decodeErr = fmt.Errorf("decoding an entry: %w", err)
			}
			continue
		}
		if f.Match(&fl) {
			fn(&fl)
		}
	}
	return interrupted, started, decodeErr
}
