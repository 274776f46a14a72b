package dataplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/internal/planner/everyop"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Every switch of the dataplane's over the kinds of operation names every
// kind, and panics on one it does not: a kind added to the planner (and
// to everyop) fails here until the dataplane says what it does with it.
// Each kind is carried out by what its batch kind calls for.
func TestEveryOperationIsNamed(t *testing.T) {
	l := newLedger(time.Now)
	l.state = plan.NewKernelState()
	a := &applier{ledger: l}
	for _, op := range everyop.Ops() {
		t.Run(fmt.Sprintf("%T", op), func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					t.Error(v)
				}
			}()
			prepares(op)
			a.holdBack([]plan.Op{op}, &HeldBackError{})
			draining{}.track(op, time.Time{})
			kind := plan.New(op).Phases[0].Batches[0].Kind
			if own := a.onItsOwn(op, target{}, nil) != nil; own != (kind == planner.EachOp) {
				t.Errorf("written on its own: %v, but the planner's batch kind is %v", own, kind)
			}
			switch kind {
			case planner.IPVSBatch:
				addIPVS(&ipvs.Batch{}, op)
				addUpdate(&ipvs.Batch{}, op)
				isDelete(op, true)
			case planner.AddressBatch:
				addressOf(op)
			}
		})
	}
}
