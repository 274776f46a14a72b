package testutil

import (
	"fmt"
	"os"
	"runtime"

	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"golang.org/x/sys/unix"
)

func newNetNS() (*NetNS, error) {
	type result struct {
		file *os.File
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The goroutine exits without unlocking, so the runtime discards
		// the thread together with its namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		done <- result{file: f, err: err}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	return &NetNS{file: r.file}, nil
}

// Do runs fn on an OS thread that has entered the namespace. Programs that
// fn starts inherit the namespace.
func (n *NetNS) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.FD(), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// setLoopbackUp sets IFF_UP on lo with an ioctl, which needs no netlink
// library in this package.
func setLoopbackUp() error {
	fd, err := unix.Socket(uapi.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | uapi.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}
