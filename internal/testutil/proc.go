package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a program a test started and waits for: a daemon or a proxy.
// Its end is seen once, by one goroutine, and every method after that
// reads the same outcome, so that a test may ask whether it exited, stop
// it and stop it again at its end in any order.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited, once done is closed
}

// ErrNotStopped is in the error of a Stop that had to kill the program.
var ErrNotStopped = errors.New("did not stop on SIGTERM")

// StartProc starts cmd in ns, or in the test's own namespace if ns is
// nil, and waits for it in the background.
func StartProc(cmd *exec.Cmd, ns *NetNS) (*Proc, error) {
	start := cmd.Start
	if ns != nil {
		start = func() error { return ns.Do(cmd.Start) }
	}
	if err := start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the program has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the program has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the program exited (nil for status 0); it is only meaningful
// once Done is closed.
func (p *Proc) Err() error { return p.err }

// Stop sends SIGTERM, as a pod is ended, and waits for the program to
// exit, returning how it exited; if it is still running after grace it is
// killed, waited for, and the error wraps ErrNotStopped. On a program that
// has already exited it returns how it did at once.
func (p *Proc) Stop(grace time.Duration) error {
	if p.Exited() {
		return p.err
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s %w within %v; killed", filepath.Base(p.Cmd.Path), ErrNotStopped, grace)
	}
}

// Kill sends SIGKILL and waits for the program to exit.
func (p *Proc) Kill() {
	if !p.Exited() {
		p.Cmd.Process.Kill()
	}
	<-p.done
}

// WaitFile waits up to timeout for the program to write path (a daemon's
// state file, written after its first sync) and returns how long that
// took; it fails at once if the program exits first.
func (p *Proc) WaitFile(path string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < timeout {
		if _, err := os.Stat(path); err == nil {
			return time.Since(start), nil
		}
		select {
		case <-p.done:
			return 0, fmt.Errorf("%s exited: %v", filepath.Base(p.Cmd.Path), p.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no %s within %v", filepath.Base(path), timeout)
}
