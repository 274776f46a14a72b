package ipset

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"time"

	"golang.org/x/sys/unix"
)

// Plan is what it takes to turn a set's entries into the desired ones.
type Plan struct {
	// Add holds desired entries the set lacks, and entries whose comment
	// changes (adding with ExistOK rewrites it).
	Add []Entry
	// Delete holds entries the set has and should not.
	Delete []Entry
}

// Diff compares a set's current entries with the desired ones. Entries are
// the same when their addresses, networks, protocol and port are; timeouts
// and counters are not compared. Duplicates in desired count once.
func Diff(current, desired []Entry) Plan {
	// One map over the current entries; seen marks those still desired.
	index := make(map[key]int32, len(current))
	for i := range current {
		index[current[i].key()] = int32(i)
	}
	seen := make([]bool, len(current))
	var added map[key]bool
	var p Plan
	for j := range desired {
		e := &desired[j]
		k := e.key()
		if i, ok := index[k]; ok {
			if !seen[i] && current[i].Comment != e.Comment {
				p.Add = append(p.Add, *e)
			}
			seen[i] = true
			continue
		}
		if added == nil {
			added = map[key]bool{}
		}
		if !added[k] {
			added[k] = true
			p.Add = append(p.Add, *e)
		}
	}
	for i := range current {
		if !seen[i] {
			p.Delete = append(p.Delete, current[i])
		}
	}
	return p
}

// Apply carries out a plan on a set: its deletions, then its additions,
// both with ExistOK. It reads nothing from the kernel, so it costs what the
// change costs, whatever the size of the set: the steady-state path when the
// caller knows what changed.
func (c *Conn) Apply(ctx context.Context, name string, p Plan) error {
	if err := checkName("apply", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.kind(ctx, name)
	if err != nil {
		return err
	}
	return c.applyLocked(ctx, h, p)
}

func (c *Conn) applyLocked(ctx context.Context, h Header, p Plan) error {
	if len(p.Delete) > 0 {
		if err := c.bulkLocked(ctx, "delete", cmdDel, h.Type, h.family(), h.Name, p.Delete, false); err != nil {
			return err
		}
	}
	if len(p.Add) > 0 {
		return c.bulkLocked(ctx, "add", cmdAdd, h.Type, h.family(), h.Name, p.Add, false)
	}
	return nil
}

// Sync makes a set hold the desired entries by changing only the
// difference, read from one dump: deletions first, then additions. Readers
// may see the set between the two steps; use Replace when they must not.
// Reading and comparing the whole set costs about what Replace does for a
// large set; Sync's value is that it leaves unchanged entries (and their
// counters and timeouts) alone. When the change is known, Apply is cheaper.
func (c *Conn) Sync(ctx context.Context, name string, desired []Entry) (Plan, error) {
	if err := checkName("sync", name); err != nil {
		return Plan{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sets, err := c.list(ctx, name, 0)
	if err != nil {
		return Plan{}, err
	}
	plan := Diff(sets[0].entries, desired)
	return plan, c.applyLocked(ctx, sets[0].header, plan)
}

// Replace makes the set s.Name hold exactly entries, which readers see
// appear all at once: it fills a temporary set created from s, swaps it
// with s.Name (created first if missing) and destroys the temporary set. An
// existing s.Name must have s's type and family (else ErrTypeMismatch); its
// other options become s's. If any entry fails, s.Name is left untouched.
func (c *Conn) Replace(ctx context.Context, s Set, entries []Entry) error {
	if err := s.validate(); err != nil {
		return &OpError{Op: "replace", Object: s.Name, Err: err}
	}
	tmp := s
	tmp.Name = TempName(s.Name)
	if tmp.HashSize == 0 && s.Type.isHash() {
		tmp.HashSize = hashSizeFor(len(entries))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.create(ctx, s, true); err != nil && !errors.Is(err, ErrSetExist) {
		return err
	}
	// A temporary set left by an interrupted Replace is stale.
	if err := c.namedLocked(ctx, "destroy", cmdDestroy, tmp.Name); err != nil && !errors.Is(err, ErrSetNotExist) {
		return err
	}
	if err := c.create(ctx, tmp, true); err != nil {
		return err
	}
	err := c.bulkLocked(ctx, "add", cmdAdd, s.Type, s.family(), tmp.Name, entries, false)
	if err == nil {
		err = c.swapWhenFree(ctx, tmp.Name, s.Name)
	}
	// The temporary set goes whatever happened; after a swap it holds the
	// old entries.
	dctx := context.WithoutCancel(ctx)
	if derr := c.namedLocked(dctx, "destroy", cmdDestroy, tmp.Name); err == nil {
		err = derr
	}
	return err
}

// swapWhenFree swaps two sets, waiting out dumps: the kernel refuses to
// swap a set that a dump is reading (EBUSY).
func (c *Conn) swapWhenFree(ctx context.Context, a, b string) error {
	delay := time.Millisecond
	for {
		err := c.twoNamesLocked(ctx, "swap", cmdSwap, a, b)
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// TempName is the name Replace gives its temporary set for name: a prefix
// of name and a hash of all of it, within the kernel's name limit.
func TempName(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	const keep = maxNameLen - 1 - 10
	return fmt.Sprintf("%.*s-t%08x", keep, name, h.Sum32())
}

// hashSizeFor picks a hash size that holds n entries without the kernel
// growing the table while it is filled: it starts from 1024 buckets of up
// to 12 entries and doubles when they fill.
func hashSizeFor(n int) uint32 {
	const minSize, perBucket = 1024, 4
	want := uint(n / perBucket)
	if want <= minSize {
		return minSize
	}
	return 1 << bits.Len(want-1)
}
