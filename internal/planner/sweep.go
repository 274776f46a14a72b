package planner

import (
	"iter"
	"net/netip"
)

// Sweep hands out a compare of everything in pieces, for a caller that
// must not stall on one: at 10,000 services a full compare takes tens of
// milliseconds natively and a second under emulation, and every change
// that arrives meanwhile waits for it. Its first piece is the node-wide
// objects alone (Scope.Global); together its pieces cover every
// object observed and desired hold when it starts, and those added to
// them before the sweep reaches their map. Both states may change
// between pieces, as a sync's own writes change them, but not while a
// piece is taken. Stop a sweep left unfinished.
type Sweep struct {
	next    func() (sweepObject, bool)
	stop    func()
	objects int
	started bool
}

// sweepObject is one object a sweep looks at: a virtual server, an
// address or a set's entry, by which of its fields is set, or one it
// passes over (sweepSeen: desired's, which observed holds too, already
// covered); those count towards a piece's size, so that no piece is left
// to look up a whole map.
type sweepObject struct {
	kind    sweepKind
	virtual VirtualKey
	addr    netip.Addr
	set     string
	entry   Entry
}

type sweepKind uint8

const (
	sweepSeen sweepKind = iota
	sweepVirtual
	sweepAddress
	sweepEntry
)

// NewSweep starts a sweep of observed against desired.
func NewSweep(observed, desired *KernelState) *Sweep {
	next, stop := iter.Pull(sweepObjects(observed, desired))
	return &Sweep{next: next, stop: stop, objects: observed.objects() + desired.objects()}
}

// Objects is about how many objects the sweep looks at, as the states
// stood when it started, each counted by its weight (see Next): the
// sizes of its pieces add up to it.
func (s *Sweep) Objects() int { return s.objects }

// objects counts the objects s holds by their weight in a sweep.
func (s *KernelState) objects() int {
	n := sweepVirtualWeight*len(s.Virtual) + len(s.Addresses)
	for _, entries := range s.Entries {
		n += len(entries)
	}
	return n
}

// sweepVirtualWeight is what a virtual server counts for in a piece's
// size against an address or an entry: comparing it, its real servers
// and their connections costs about three times as much.
const sweepVirtualWeight = 3

// sweepObjects yields every object of observed, then those of desired,
// passing over those observed holds, ranging the live maps.
func sweepObjects(observed, desired *KernelState) iter.Seq[sweepObject] {
	return func(yield func(sweepObject) bool) {
		for vk := range observed.Virtual {
			if !yield(sweepObject{kind: sweepVirtual, virtual: vk}) {
				return
			}
		}
		for vk := range desired.Virtual {
			o := sweepObject{kind: sweepVirtual, virtual: vk}
			if _, ok := observed.Virtual[vk]; ok {
				o = sweepObject{}
			}
			if !yield(o) {
				return
			}
		}
		for a := range observed.Addresses {
			if !yield(sweepObject{kind: sweepAddress, addr: a}) {
				return
			}
		}
		for a := range desired.Addresses {
			o := sweepObject{kind: sweepAddress, addr: a}
			if observed.Addresses[a] {
				o = sweepObject{}
			}
			if !yield(o) {
				return
			}
		}
		for set, entries := range observed.Entries {
			for e := range entries {
				if !yield(sweepObject{kind: sweepEntry, set: set, entry: e}) {
					return
				}
			}
		}
		for set, entries := range desired.Entries {
			have := observed.Entries[set]
			for e := range entries {
				o := sweepObject{kind: sweepEntry, set: set, entry: e}
				if have[e] {
					o = sweepObject{}
				}
				if !yield(o) {
					return
				}
			}
		}
	}
}

// Next adds the next piece to scope, and reports whether the sweep is
// done: the piece added when it is was its last, possibly empty. The
// first piece is the node-wide objects, and the rest with them when
// Objects is at most n; each after it, objects up to n by their weight
// (a virtual server sweepVirtualWeight, any other one).
func (s *Sweep) Next(scope *Scope, n int) (done bool) {
	if scope.Virtual == nil {
		scope.Virtual = map[VirtualKey]bool{}
	}
	if scope.Addresses == nil {
		scope.Addresses = map[netip.Addr]bool{}
	}
	if scope.Entries == nil {
		scope.Entries = map[string]map[Entry]bool{}
	}
	if !s.started {
		s.started, scope.Global = true, true
		if s.objects > n {
			return false
		}
	}
	for n > 0 {
		o, ok := s.next()
		if !ok {
			return true
		}
		n--
		switch o.kind {
		case sweepVirtual:
			n -= sweepVirtualWeight - 1
			scope.Virtual[o.virtual] = true
		case sweepAddress:
			scope.Addresses[o.addr] = true
		case sweepEntry:
			scope.addEntry(o.set, o.entry)
		}
	}
	return false
}

// Stop ends the sweep; it is safe to call more than once.
func (s *Sweep) Stop() { s.stop() }
