package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// FD returns the namespace's file descriptor, for the packages' Config.NetNS.
func (n *NetNS) FD() int { return int(n.file.Fd()) }

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

var errNoProgram = errors.New("not found")

func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, errNoProgram)
	}
	return p, nil
}
