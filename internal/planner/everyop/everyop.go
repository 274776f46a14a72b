// Package everyop gives a value of every kind of plan operation, for the
// tests of the switches over them (the metrics' names of operations, the
// planner's record of what they change): such a test hands its switch
// every kind, so a kind added to the planner and not to the switch fails
// it, and this package's own test fails while the kind is not here.
package everyop

import "github.com/ipvsplane/ipvsplane/internal/planner"

// Ops returns a zero value of each kind of operation.
func Ops() []planner.Op {
	return []planner.Op{
		planner.CreateSet{},
		planner.AddEntries{},
		planner.DelEntries{},
		planner.ReplaceRules{},
		planner.AddVirtual{},
		planner.UpdateVirtual{},
		planner.DeleteVirtual{},
		planner.AddReals{},
		planner.UpdateReal{},
		planner.DeleteReal{},
		planner.Bind{},
		planner.Unbind{},
		planner.ReconcileFlows{},
		planner.RemoveKubeProxyRules{},
	}
}
