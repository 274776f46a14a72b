//go:build vmtest

package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The example runs as a newcomer would run it, in the guest's namespace.
func TestExampleRuns(t *testing.T) {
	testutil.RequireVM(t)
	for _, unbind := range []bool{false, true} {
		if err := run("kube-ipvs0", unbind, []string{"10.96.0.10", "fd00:96::10"}); err != nil {
			t.Fatal(err)
		}
	}
}
