package dataplane

import (
	"context"
	"fmt"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// applyNodeSettings writes the sysctls and the IPVS timeouts.
func (d *Dataplane) applyNodeSettings(ctx context.Context, node *model.Node) []error {
	var errs []error
	err := d.k.ns.InProc(func(procSys, _ string) error {
		_, err := WriteSysctls(procSys, append(node.Sysctls(), d.kernelSysctls...))
		return err
	})
	if err != nil {
		errs = append(errs, err)
	}
	t := ipvs.Timeouts{TCP: node.TCPTimeout, TCPFin: node.TCPFinTimeout, UDP: node.UDPTimeout}
	if t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		if _, err := withRetries(ctx, func() error { return d.k.ipvs.SetTimeouts(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: IPVS timeouts: %w", err))
		}
	}
	return errs
}
