package dataplane

import (
	"context"
	"fmt"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// nodeSettings remembers the sysctls and IPVS timeouts last written with
// success, so that they are written again only when they change.
// kube-proxy writes them once, at start: an operator's later sysctl or
// ipvsadm --set stands, through the full syncs and rereads too.
type nodeSettings struct {
	sysctls  []model.Sysctl
	timeouts ipvs.Timeouts
	// sysctlsDone and timeoutsDone are set once each part is written.
	sysctlsDone, timeoutsDone bool
}

// applyNodeSettings writes the sysctls and the IPVS timeouts node asks
// for, each unless it was written already as it is.
func (d *Dataplane) applyNodeSettings(ctx context.Context, node *model.Node) []error {
	var errs []error
	w := &d.written
	if sysctls := append(node.Sysctls(), d.kernelSysctls...); !w.sysctlsDone || !slices.Equal(sysctls, w.sysctls) {
		err := d.k.ns.InProc(func(procSys, _ string) error {
			_, err := WriteSysctls(procSys, sysctls)
			return err
		})
		if err != nil {
			errs = append(errs, err)
		}
		w.sysctls, w.sysctlsDone = sysctls, err == nil
	}
	t := ipvs.Timeouts{TCP: node.TCPTimeout, TCPFin: node.TCPFinTimeout, UDP: node.UDPTimeout}
	if w.timeoutsDone && t == w.timeouts {
		return errs
	}
	// As kube-proxy: none set leaves the kernel's, and so does a zero.
	var err error
	if t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		if _, err = withRetries(ctx, func() error { return d.k.ipvs.SetTimeouts(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: IPVS timeouts: %w", err))
		}
	}
	w.timeouts, w.timeoutsDone = t, err == nil
	return errs
}
