package dataplane

import (
	"context"
	"fmt"
	"runtime"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// applyNodeSettings writes the sysctls and the IPVS timeouts.
func (d *Dataplane) applyNodeSettings(ctx context.Context, node *model.Node) []error {
	var errs []error
	err := d.inNamespace(func() error {
		_, err := WriteSysctls("/proc/sys", append(node.Sysctls(), d.kernelSysctls...))
		return err
	})
	if err != nil {
		errs = append(errs, err)
	}
	t := ipvs.Timeouts{TCP: node.TCPTimeout, TCPFin: node.TCPFinTimeout, UDP: node.UDPTimeout}
	if t.TCP > 0 || t.TCPFin > 0 || t.UDP > 0 {
		if _, err := withRetries(ctx, func() error { return d.ipvs.SetTimeouts(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: IPVS timeouts: %w", err))
		}
	}
	return errs
}

// inNamespace runs fn on a thread in the dataplane's network namespace:
// /proc/sys/net shows the namespace of the thread that opens it.
func (d *Dataplane) inNamespace(fn func() error) error {
	if d.cfg.NetNS == 0 {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// The thread is not unlocked, so the runtime discards it with its
		// namespace.
		runtime.LockOSThread()
		if err := unix.Setns(d.cfg.NetNS, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("dataplane: entering the network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}
