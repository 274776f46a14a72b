//go:build !linux

package nl

import (
	"errors"
	"fmt"
	"runtime"
)

// errLinuxOnly is what every kernel call returns off Linux: netlink is
// Linux's. The packages build everywhere so that programs and tests using
// the in-memory fakes compile on a developer's machine.
func errLinuxOnly() error {
	return fmt.Errorf("netlink: Linux only, not %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Dial fails: there is no netlink off Linux.
func Dial(protocol, netns int) (*Conn, error) { return nil, errLinuxOnly() }

// SetStrictCheck fails: only a kernel socket has the option.
func (c *Conn) SetStrictCheck() error { return errLinuxOnly() }

// SetBuffers fails: only a kernel socket has buffers.
func (c *Conn) SetBuffers(read, write int) error { return errLinuxOnly() }
