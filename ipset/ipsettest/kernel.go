package ipsettest

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/internal/seam"
)

// Socket buffer sizes the Conns see unless Options say otherwise: what a
// privileged Dial gets.
const (
	defaultReadBuffer  = 16 << 20
	defaultWriteBuffer = 8 << 20
)

// Options tune the fake; the zero value is a fresh kernel.
type Options struct {
	// ReadBuffer and WriteBuffer are the socket buffer sizes the Conns
	// see, which bound how a Conn cuts bulk changes into writes; 0 means
	// 16 MiB and 8 MiB, as a privileged Dial gets.
	ReadBuffer, WriteBuffer int
}

// Kernel is the ipset of one network namespace, in memory. Its methods
// are safe for concurrent use.
type Kernel struct {
	opts Options

	mu sync.Mutex
	// sets are by kernel index; a destroyed set leaves a free slot that
	// the next create takes, as ip_set_list does.
	sets []*set
}

type set struct {
	header ipset.Header
	// entries are in the order they were added; at finds an entry's
	// index by its key. A deleted entry stays in entries, a hole (at no
	// longer points to it), until the set is next read, so that a lookup,
	// add or delete costs the same in a set of any size; holes counts
	// them.
	entries []ipset.Entry
	at      map[entryKey]int
	holes   int
	// refs counts the firewall rules using the set (SetReferences).
	refs uint32
}

// emptySet returns an empty set with header h.
func emptySet(h ipset.Header) *set {
	return &set{header: h, at: map[entryKey]int{}}
}

// list returns the entries in the order they were added, the holes of
// deleted ones closed.
func (s *set) list() []ipset.Entry {
	if s.holes == 0 {
		return s.entries
	}
	kept := s.entries[:0]
	for i, e := range s.entries {
		if k := keyOf(e); s.live(k, i) {
			s.at[k] = len(kept)
			kept = append(kept, e)
		}
	}
	clear(s.entries[len(kept):])
	s.entries, s.holes = kept, 0
	return s.entries
}

// live reports whether the entry at index i, of key k, is in the set:
// not deleted, nor deleted and added again further on.
func (s *set) live(k entryKey, i int) bool {
	j, ok := s.at[k]
	return ok && j == i
}

// flush empties the set.
func (s *set) flush() {
	s.entries, s.holes = nil, 0
	clear(s.at)
}

// New returns a kernel without sets. opts may be nil.
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

// Dial returns a real *ipset.Conn whose socket reaches this kernel, as
// ipset.Dial returns one on the host's: it has agreed on protocol 7.
// Conns of one Kernel share its sets, as sockets in one namespace do.
func (k *Kernel) Dial() *ipset.Conn {
	c, err := seam.NewConn(nl.Serve(k.serve), k.opts.ReadBuffer, k.opts.WriteBuffer)
	if err != nil {
		// The fake always agrees on the protocol Dial asks for first.
		panic(fmt.Sprintf("ipsettest: negotiating the protocol with the fake: %v", err))
	}
	return c.(*ipset.Conn)
}

// Names returns the names of the sets, in the kernel's (index) order.
func (k *Kernel) Names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var names []string
	for _, s := range k.sets {
		if s != nil {
			names = append(names, s.header.Name)
		}
	}
	return names
}

// Set returns a set's header and entries, in the order they were added,
// and whether it exists.
func (k *Kernel) Set(name string) (ipset.Header, []ipset.Entry, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.find(name)
	if s == nil {
		return ipset.Header{}, nil, false
	}
	return s.headerNow(), slices.Clone(s.list()), true
}

// HasIndex reports whether a set of the kernel index exists: what a
// firewall rule's set match names a set by (nftrulestest's
// Options.SetExists takes this method).
func (k *Kernel) HasIndex(index uint16) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return int(index) < len(k.sets) && k.sets[index] != nil
}

// SetReferences says how many firewall rules use the set, as iptables
// rules with -m set do: a referenced set cannot be destroyed or renamed.
func (k *Kernel) SetReferences(name string, n uint32) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.find(name)
	if s == nil {
		return fmt.Errorf("ipsettest: set %s does not exist", name)
	}
	s.refs = n
	return nil
}

// Dump prints every set in `ipset save` syntax, for test failures and
// golden comparisons.
func (k *Kernel) Dump() string {
	var b strings.Builder
	for _, name := range k.Names() {
		if h, entries, ok := k.Set(name); ok {
			// A strings.Builder does not fail.
			_ = ipset.WriteSave(&b, h, entries)
		}
	}
	return b.String()
}

// find returns the set of the name, or nil; k.mu is held.
func (k *Kernel) find(name string) *set {
	if i := k.index(name); i >= 0 {
		return k.sets[i]
	}
	return nil
}

// index returns the set's kernel index, or -1; k.mu is held.
func (k *Kernel) index(name string) int {
	return slices.IndexFunc(k.sets, func(s *set) bool { return s != nil && s.header.Name == name })
}

// headerNow is the header with its current counts.
func (s *set) headerNow() ipset.Header {
	h := s.header
	h.Entries, h.References = uint32(len(s.at)), s.refs
	return h
}
