package planner

import (
	"cmp"
	"iter"
	"slices"
	"strings"
)

// Plan is the kernel operations of a sync, in phases that run in order
// (see [New]); each phase's operations come in batches, each of
// operations the kernel takes together.
type Plan struct {
	Phases []Phase
}

// Phase is one step of a plan: its name ("sets", "entries", "rules",
// "virtual", "real", "bind", "drain", "delete virtual", "unbind",
// "delete entries", "kube-proxy", "conntrack") and its batches.
type Phase struct {
	Name    string
	Batches []Batch
}

// Batch is operations of one phase that go to the kernel together, as
// Kind says.
type Batch struct {
	Kind BatchKind
	Ops  []Op
}

// BatchKind says how a batch's operations go to the kernel.
type BatchKind uint8

const (
	// EachOp batches go one operation at a time: ipset operations (each
	// is bulk already), the rules, kube-proxy's chains and the conntrack
	// reconciliations.
	EachOp BatchKind = iota
	// IPVSBatch batches go as one batch of IPVS requests (see
	// [Batch.Requests]), at most 2,048 of them.
	IPVSBatch
	// AddressBatch batches bind, or unbind, addresses in few writes.
	AddressBatch
)

// ipvsBatchRequests bounds the requests of one IPVS batch. The kernel
// side holds each request whole until it has answered them all (some
// 400 bytes each), and its writes are cut to the socket's buffers anyway,
// so a larger batch costs memory and saves nothing; it also keeps a first
// sync of a large cluster from encoding every request at once.
const ipvsBatchRequests = 2048

var phaseNames = [...]string{
	phaseCreateSet: "sets", phaseAddEntries: "entries", phaseRules: "rules",
	phaseVirtual: "virtual", phaseReal: "real", phaseBind: "bind", phaseDrain: "drain",
	phaseDeleteVirtual: "delete virtual", phaseUnbind: "unbind", phaseDelEntries: "delete entries",
	phaseConntrack: "conntrack", phaseKubeProxy: "kube-proxy",
}

// New orders operations by phase, keeping the order of those of one
// phase, and groups them in batches.
func New(ops ...Op) *Plan {
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.phase(), b.phase()) })
	p := &Plan{}
	for len(ops) > 0 {
		ph := ops[0].phase()
		n := 1
		for n < len(ops) && ops[n].phase() == ph {
			n++
		}
		p.Phases = append(p.Phases, Phase{Name: phaseNames[ph], Batches: batches(ops[:n:n])})
		ops = ops[n:]
	}
	return p
}

// batches cuts one phase's operations into batches: runs of IPVS
// operations up to ipvsBatchRequests requests, runs of binds or of
// unbinds (a phase has one or the other), and the others one by one.
func batches(ops []Op) []Batch {
	var out []Batch
	for len(ops) > 0 {
		kind, n := batchKind(ops[0]), 1
		switch kind {
		case IPVSBatch:
			for reqs := requests(ops[0]); n < len(ops) && batchKind(ops[n]) == IPVSBatch; n++ {
				if reqs += requests(ops[n]); reqs > ipvsBatchRequests {
					break
				}
			}
		case AddressBatch:
			for n < len(ops) && batchKind(ops[n]) == AddressBatch {
				n++
			}
		}
		out = append(out, Batch{Kind: kind, Ops: ops[:n:n]})
		ops = ops[n:]
	}
	return out
}

func batchKind(op Op) BatchKind {
	switch op.(type) {
	case AddVirtual, UpdateVirtual, DeleteVirtual, AddReals, UpdateReal, DeleteReal:
		return IPVSBatch
	case Bind, Unbind:
		return AddressBatch
	}
	return EachOp
}

// requests counts the IPVS requests of an operation: one, or one per
// real server of an AddReals.
func requests(op Op) int {
	if o, ok := op.(AddReals); ok {
		return len(o.Reals)
	}
	return 1
}

// Requests counts the IPVS requests of a batch's operations: one per
// operation, and one per real server of an AddReals.
func (b Batch) Requests() int {
	n := 0
	for _, op := range b.Ops {
		n += requests(op)
	}
	return n
}

// All yields the plan's operations in order.
func (p *Plan) All() iter.Seq[Op] {
	return func(yield func(Op) bool) {
		for _, ph := range p.Phases {
			for _, b := range ph.Batches {
				for _, op := range b.Ops {
					if !yield(op) {
						return
					}
				}
			}
		}
	}
}

// Len returns the number of operations.
func (p *Plan) Len() int {
	n := 0
	for _, ph := range p.Phases {
		for _, b := range ph.Batches {
			n += len(b.Ops)
		}
	}
	return n
}

// Append adds the phases of another plan after this one's, as a sync
// does with the operations it tries again.
func (p *Plan) Append(q *Plan) { p.Phases = append(p.Phases, q.Phases...) }

// String prints the plan one operation per line: the dry-run output.
func (p *Plan) String() string {
	var b strings.Builder
	for op := range p.All() {
		b.WriteString(op.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Additions returns the operations of p that only add to the kernel: the
// sets, entries, virtual servers, real servers and addresses it does not
// hold yet, and the rules, which depend on the node alone and which new
// virtual servers need before they draw traffic. They change and remove
// nothing else the kernel holds, so they are safe to program from a state
// that is only partly known (see dataplane's Prefill).
//
// The virtual servers in held, and their real servers, are left out too:
// a partial state may give them to a claim the whole state does not.
func (p *Plan) Additions(held map[VirtualKey]bool) *Plan {
	var ops []Op
	for op := range p.All() {
		switch o := op.(type) {
		case AddVirtual:
			if !held[o.Virtual.VirtualKey] {
				ops = append(ops, op)
			}
		case AddReals:
			if !held[o.Virtual] {
				ops = append(ops, op)
			}
		case CreateSet, AddEntries, ReplaceRules, Bind:
			ops = append(ops, op)
		}
	}
	return New(ops...)
}
