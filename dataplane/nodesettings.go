package dataplane

import (
	"context"
	"fmt"
	"slices"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// nodeSettings remembers what the dataplane found of the node's kernel
// and wrote to it: whether it has IPv6, the sysctls its release calls for,
// which IPVS schedulers it has, and the sysctls and IPVS timeouts last
// written with success, so that they are written again only when they
// change. kube-proxy writes them once, at start: an operator's later
// sysctl or ipvsadm --set stands, through the full syncs and rereads too.
type nodeSettings struct {
	// ipv6 is false on a kernel without IPv6: the node is then served
	// IPv4Only.
	ipv6 bool
	// kernelSysctls are the settings this kernel's release calls for.
	kernelSysctls []model.Sysctl
	schedulers    schedulerCache
	sysctls       []model.Sysctl
	timeouts      ipvs.Timeouts
	// sysctlsDone and timeoutsDone are set once each part is written.
	sysctlsDone, timeoutsDone bool
}

// write writes the sysctls and the IPVS timeouts node asks for, each
// unless it was written already as it is.
func (n *nodeSettings) write(ctx context.Context, k *kernel, node *model.Node) []error {
	var errs []error
	if sysctls := append(node.Sysctls(), n.kernelSysctls...); !n.sysctlsDone || !slices.Equal(sysctls, n.sysctls) {
		err := k.ns.InProc(func(procSys, _ string) error {
			_, err := WriteSysctls(procSys, sysctls)
			return err
		})
		if err != nil {
			errs = append(errs, err)
		}
		n.sysctls, n.sysctlsDone = sysctls, err == nil
	}
	t := ipvs.Timeouts{TCP: node.TCPTimeout, TCPFin: node.TCPFinTimeout, UDP: node.UDPTimeout}
	if n.timeoutsDone && t == n.timeouts {
		return errs
	}
	// As kube-proxy: none set leaves the kernel's, and so does a zero.
	var err error
	if t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		if _, err = withRetries(ctx, func() error { return k.ipvs.SetTimeouts(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: IPVS timeouts: %w", err))
		}
	}
	n.timeouts, n.timeoutsDone = t, err == nil
	return errs
}
