package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// MainWithLeakCheck runs the tests and then fails the run if file
// descriptors opened by them are still open: a kernel-facing package must
// close every socket it opens.
//
//	func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }
func MainWithLeakCheck(m *testing.M) {
	// The runtime opens its poller lazily; open it now so it is not counted.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before := openFDs()
	code := m.Run()
	if leaked := newFDs(before, openFDs()); code == 0 && len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "file descriptors left open by the tests: %v\n", leaked)
		code = 1
	}
	os.Exit(code)
}

func openFDs() map[string]string {
	fds := map[string]string{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

func newFDs(before, after map[string]string) []string {
	var leaked []string
	for fd, target := range after {
		if before[fd] == target {
			continue
		}
		leaked = append(leaked, fd+" -> "+target)
	}
	slices.Sort(leaked)
	return leaked
}
