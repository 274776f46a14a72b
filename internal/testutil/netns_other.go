//go:build !linux

package testutil

import (
	"errors"
	"fmt"
	"runtime"
)

// Network namespaces are Linux's; the tests that make one run there.
func linuxOnly() error {
	return fmt.Errorf("network namespaces: Linux only, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func newNetNS() (*NetNS, error) { return nil, linuxOnly() }

// Do fails: no NetNS exists off Linux.
func (n *NetNS) Do(fn func() error) error { return linuxOnly() }

func setLoopbackUp() error { return linuxOnly() }
