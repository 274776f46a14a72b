//go:build hosttest || vmtest

package ipset

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// dialNS makes a fresh namespace and a Conn in it.
func dialNS(t *testing.T) (*testutil.NetNS, *Conn) {
	t.Helper()
	ns := testutil.NewNetNS(t)
	testutil.RequireProgram(t, "ipset")
	return ns, dialIn(t, ns)
}

func dialIn(t testing.TB, ns *testutil.NetNS) *Conn {
	t.Helper()
	return testutil.Open(t, func() (*Conn, error) { return Dial(&Config{NetNS: ns.FD()}) })
}

// ipsetSave runs the real `ipset save NAME` and returns its create line and
// its add lines without the "add NAME " prefix, sorted.
func ipsetSave(t testing.TB, ns *testutil.NetNS, name string) (string, []string) {
	t.Helper()
	var create string
	var adds []string
	for line := range strings.Lines(ns.Run(t, "ipset", "save", name)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "create "):
			create = line
		case strings.HasPrefix(line, "add "+name+" "):
			adds = append(adds, strings.TrimPrefix(line, "add "+name+" "))
		}
	}
	slices.Sort(adds)
	return create, adds
}

// sortedStrings prints entries in save syntax, sorted.
func sortedStrings(es []Entry) []string {
	out := entryStrings(es)
	slices.Sort(out)
	return out
}

// crossCheck compares a set as ipset(8) saves it with want, and with what
// this package lists.
func crossCheck(t testing.TB, ns *testutil.NetNS, c *Conn, name string, want []string) {
	t.Helper()
	create, adds := ipsetSave(t, ns, name)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(adds, want) {
		t.Fatalf("ipset save %s: %d entries, want %d\n got %s\nwant %s", name, len(adds), len(want), head(adds), head(want))
	}
	h, entries, err := c.List(testutil.Context(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedStrings(entries); !slices.Equal(got, adds) {
		t.Fatalf("List %s disagrees with ipset save\n got %s\nwant %s", name, head(got), head(adds))
	}
	if h.String() != create {
		t.Fatalf("header\n got %s\nipset save says %s", h, create)
	}
}

func head(s []string) string {
	if len(s) > 6 {
		return strings.Join(s[:6], " | ") + " ..."
	}
	return strings.Join(s, " | ")
}

// runWithStdin runs a program with input on its standard input.
func runWithStdin(input, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
