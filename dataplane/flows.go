package dataplane

import (
	"context"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/internal/planner"
)

// reconcileFlows deletes the stale conntrack entries of op's family and
// protocol (see planner.FlowMatcher): one dump that the kernel filters by
// family and protocol, matched here against the service ports in maps,
// then the stale entries' deletes, many per write. kube-proxy dumps the
// family's whole table, then dumps it again to delete. Once it ran to
// the end, the planner no longer has it due; a failure leaves it due,
// and the next sync runs it again.
func (a *applier) reconcileFlows(ctx context.Context, p *planner.Planner, op plan.ReconcileFlows) (int, error) {
	m := p.FlowMatcher(op)
	n := 0
	if !m.Empty() {
		var err error
		n, err = a.k.flows.DeleteFunc(ctx, conntrack.Filter{Family: op.Family, Protocol: op.Protocol}, func(f *conntrack.Flow) bool {
			return m.Stale(netip.AddrPortFrom(f.Orig.Dst, f.Orig.DstPort), netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort))
		})
		if err != nil {
			return n, err
		}
	}
	p.Reconciled(op)
	return n, nil
}
