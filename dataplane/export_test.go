package dataplane

import "github.com/ipvsplane/ipvsplane/dataplane/plan"

// StateOps returns the operations of a plan that change what the kernel
// holds of the state: all but the conntrack reconciliations, which every
// first sync runs, a restart's too.
func StateOps(p *plan.Plan) []plan.Op {
	var ops []plan.Op
	for op := range p.All() {
		if _, ok := op.(plan.ReconcileFlows); !ok {
			ops = append(ops, op)
		}
	}
	return ops
}
