package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NetNS is a network namespace that belongs to one test.
type NetNS struct {
	file *os.File
}

// NewNetNS creates a fresh network namespace with its loopback up, and
// closes it when the test ends. The calling thread's namespace, and so the
// host's, is never changed: the work happens on a thread that is thrown
// away afterwards.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	RequireRoot(t)
	ns, err := newNetNS()
	if err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	t.Cleanup(func() { ns.file.Close() })
	if err := ns.Do(setLoopbackUp); err != nil {
		t.Fatalf("bringing lo up in the test namespace: %v", err)
	}
	return ns
}

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

// FD returns the namespace's file descriptor, for the packages' Config.NetNS.
func (n *NetNS) FD() int { return int(n.file.Fd()) }

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

// Output runs a program inside the namespace and returns its standard
// output; the error carries its standard error.
func (n *NetNS) Output(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	err := n.Do(func() error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Run runs a program inside the namespace, failing the test if it fails, and
// returns its standard output.
func (n *NetNS) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := n.Output(ctx, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setLoopbackUp sets IFF_UP on lo with an ioctl, which needs no netlink
// library in this package.
func setLoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
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
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

var errNoProgram = errors.New("not found")

func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, errNoProgram)
	}
	return p, nil
}
