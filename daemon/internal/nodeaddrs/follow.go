package nodeaddrs

import (
	"context"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// Follow reads the node's addresses every interval until ctx is
// done and hands them to set (which ignores an unchanged list). kube-proxy
// reads them at every sync; this way node ports follow an address added to
// the node after the start without a full reread each sync.
func Follow(ctx context.Context, log *zap.Logger, every time.Duration, read func(context.Context) ([]netip.Addr, error), set func([]netip.Addr)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		addrs, err := read(ctx)
		if err != nil {
			log.Warn("cannot list the node's addresses; keeping the last ones", zap.Error(err))
			continue
		}
		set(addrs)
	}
}
