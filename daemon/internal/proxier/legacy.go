package proxier

import (
	"context"

	"go.uber.org/zap"
)

// removeLegacyLeftovers removes kube-proxy's chains from the
// iptables-legacy tables once a full sync has put ipvsplane's own rules in
// place, as the dataplane does last in such a sync for iptables-nft's; it
// tries again after each full sync until it succeeds once.
func (p *Proxier) removeLegacyLeftovers(ctx context.Context) {
	if p.legacy == nil || p.legacyDone {
		return
	}
	r, err := p.legacy(ctx)
	if len(r.Removed) > 0 {
		p.log.Info("removed kube-proxy's iptables-legacy chains", zap.Int("count", len(r.Removed)), zap.Strings("chains", r.Removed))
	}
	if len(r.Unreadable) > 0 {
		p.log.Warn("the node's iptables-legacy tables are in use and cannot be read: chains a kube-proxy left there are not removed",
			zap.Strings("missingPrograms", r.Unreadable))
	}
	if err != nil {
		p.log.Warn("cannot remove kube-proxy's iptables-legacy chains; trying again after the next full sync", zap.Error(err))
		return
	}
	p.legacyDone = true
}
