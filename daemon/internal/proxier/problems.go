package proxier

import (
	"errors"

	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// reportProblems records the sync's problems as Events and logs them, up
// to status.MaxRecordedErrors: a problem that persists from sync to sync (a
// conflict, a bad field) once while it lasts, as its Event, and the
// sync's own errors every time. It returns how many kernel operations
// failed.
func (p *Proxier) reportProblems(res *dataplane.Result) int {
	failed := 0
	for _, e := range res.Errors {
		if errors.As(e, new(*dataplane.OpError)) && !refusedRealServer(e) {
			failed++
		}
	}
	fresh := p.problems.Report(p.events, res.Errors)
	for _, e := range fresh[:min(len(fresh), status.MaxRecordedErrors)] {
		p.log.Warn("sync problem", zap.Error(e))
	}
	if len(fresh) > status.MaxRecordedErrors {
		p.log.Warn("more sync problems not logged", zap.Int("count", len(fresh)-status.MaxRecordedErrors))
	}
	return failed
}

// refusedRealServer reports whether err is the kernel refusing one real
// server as invalid (EINVAL): an endpoint address the API accepts and IPVS
// does not, such as a subnet's broadcast address. It is a problem of that
// Service alone, reported as such; the rest of the node is programmed, so
// it fails neither the sync nor the removal of kube-proxy's leftovers,
// which would otherwise never run.
func refusedRealServer(err error) bool {
	var op *dataplane.OpError
	if !errors.As(err, &op) || !errors.Is(op.Err, unix.EINVAL) {
		return false
	}
	switch op.Op.(type) {
	case plan.AddReals, plan.UpdateReal:
		return true
	}
	return false
}
