package planner_test

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/internal/planner/everyop"
)

// Every kind of operation is recorded and touches its objects: the two
// switches panic on a kind they do not name.
func TestEveryOperationIsRecordedAndTouched(t *testing.T) {
	for _, op := range everyop.Ops() {
		planner.NewKernelState().Record(op)
		planner.NewScope().Touch(op)
	}
}
