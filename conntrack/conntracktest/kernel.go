package conntracktest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/internal/seam"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// Socket buffer sizes the Conns see unless Options say otherwise:
// net.core.rmem_default and wmem_default, doubled by the kernel, as an
// unprivileged setting leaves them; many deletes then take several
// writes, as on a host.
const (
	defaultReadBuffer  = 2 * 212992
	defaultWriteBuffer = 2 * 212992
)

// Options tune the fake; the zero value is a fresh table.
type Options struct {
	// ReadBuffer and WriteBuffer are the socket buffer sizes the Conns
	// see, which bound how a Conn cuts deletes into writes; 0 means
	// 416 KiB each, as an unprivileged Dial gets.
	ReadBuffer, WriteBuffer int
}

// maxEntries is what the fake reports as net.netfilter.nf_conntrack_max.
const maxEntries = 262144

// trafficTimeout is the timeout of an entry Add is given without one:
// nf_conntrack_udp_timeout, what a single UDP packet earns.
const trafficTimeout = 30 * time.Second

// Kernel is the connection tracking table of one network namespace, in
// memory. Its methods are safe for concurrent use.
type Kernel struct {
	opts Options

	mu      sync.Mutex
	entries []*entry
	lastID  uint32
}

// entry is one tracked connection; Flow.Timeout is unused, expires says
// when the entry goes.
type entry struct {
	flow    conntrack.Flow
	expires time.Time
}

// New returns an empty table. opts may be nil.
func New(opts *Options) *Kernel {
	k := &Kernel{}
	if opts != nil {
		k.opts = *opts
	}
	if k.opts.ReadBuffer == 0 {
		k.opts.ReadBuffer = defaultReadBuffer
	}
	if k.opts.WriteBuffer == 0 {
		k.opts.WriteBuffer = defaultWriteBuffer
	}
	return k
}

// Dial returns a real *conntrack.Conn whose socket reaches this table, as
// conntrack.Dial returns one on the host's. Conns of one Kernel share its
// table, as sockets in one namespace do.
func (k *Kernel) Dial() *conntrack.Conn {
	return seam.NewConn(nl.Serve(k.serve), k.opts.ReadBuffer, k.opts.WriteBuffer).(*conntrack.Conn)
}

// Add puts entries in the table as traffic would: confirmed, with the
// status bits given, a zero Reply standing for the reversed Orig and a
// zero Timeout for 30 seconds (a lone UDP packet's). The kernel assigns
// the IDs. An entry whose original or reply tuple is already tracked in
// its zone is an error, and stops Add there.
func (k *Kernel) Add(flows ...conntrack.Flow) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	k.expire(now)
	for _, f := range flows {
		if !f.Reply.Src.IsValid() {
			f.Reply = f.Orig.Reverse()
		}
		if !validTuple(&f.Orig) || !validTuple(&f.Reply) {
			return fmt.Errorf("conntracktest: add %v: incomplete tuple", f)
		}
		if k.clash(f) {
			return fmt.Errorf("conntracktest: add %v: a tracked connection has its tuple", f)
		}
		if f.Timeout <= 0 {
			f.Timeout = trafficTimeout
		}
		f.Status |= conntrack.StatusConfirmed
		k.insert(f, now)
	}
	return nil
}

// Flows returns the entries in the order they were made, each with the
// whole seconds it has left, as a dump reports them.
func (k *Kernel) Flows() []conntrack.Flow {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	k.expire(now)
	flows := make([]conntrack.Flow, len(k.entries))
	for i, e := range k.entries {
		flows[i] = e.report(now)
	}
	return flows
}

// Dump prints the table with Format.
func (k *Kernel) Dump() string { return Format(k.Flows()) }

// Format prints flows one per line, sorted, without what time changes (the
// timeout) or the kernel chooses (the ID), so that a kernel's dump and the
// fake's compare as text:
//
//	udp 10.0.0.2:40000->10.96.0.10:53 reply 10.244.1.5:5353->10.0.0.2:40000 status 0x8
func Format(flows []conntrack.Flow) string {
	lines := make([]string, len(flows))
	for i, f := range flows {
		var b strings.Builder
		fmt.Fprintf(&b, "%v status %#x", f, uint32(f.Status))
		if f.Mark != 0 {
			fmt.Fprintf(&b, " mark %#x", f.Mark)
		}
		if f.Zone != 0 {
			fmt.Fprintf(&b, " zone %d", f.Zone)
		}
		lines[i] = b.String() + "\n"
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// report is the entry as a dump shows it at now.
func (e *entry) report(now time.Time) conntrack.Flow {
	f := e.flow
	f.Timeout = e.expires.Sub(now).Truncate(time.Second)
	return f
}

// insert adds a confirmed entry with a fresh ID; k.mu is held.
func (k *Kernel) insert(f conntrack.Flow, now time.Time) *entry {
	k.lastID++
	f.ID = k.lastID
	e := &entry{flow: f, expires: now.Add(f.Timeout)}
	k.entries = append(k.entries, e)
	return e
}

// expire drops the entries whose timeout has run out, as the kernel's
// garbage collection does; k.mu is held.
func (k *Kernel) expire(now time.Time) {
	k.entries = slices.DeleteFunc(k.entries, func(e *entry) bool { return !now.Before(e.expires) })
}

// find returns the entry that tracks t in zone, in either direction, as
// nf_conntrack_find_get looks both up in one hash table; k.mu is held.
func (k *Kernel) find(t conntrack.Tuple, zone uint16) int {
	return slices.IndexFunc(k.entries, func(e *entry) bool {
		return e.flow.Zone == zone && (e.flow.Orig == t || e.flow.Reply == t)
	})
}

// clash says whether either of f's tuples is tracked in its zone, which
// nf_conntrack_hash_check_insert refuses; k.mu is held.
func (k *Kernel) clash(f conntrack.Flow) bool {
	return k.find(f.Orig, f.Zone) >= 0 || k.find(f.Reply, f.Zone) >= 0
}
