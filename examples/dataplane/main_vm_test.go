//go:build vmtest

package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The example runs as a newcomer would run it: dry run, apply, apply again,
// clean up, in the guest's namespace.
func TestExampleRuns(t *testing.T) {
	testutil.RequireVM(t)
	steps := []struct {
		dryRun, cleanup bool
		args            []string
	}{
		{dryRun: true, args: []string{"testdata/services.json"}},
		{args: []string{"testdata/services.json"}},
		{args: []string{"testdata/services.json"}},
		{cleanup: true},
	}
	for _, s := range steps {
		if err := run(s.dryRun, s.cleanup, s.args); err != nil {
			t.Fatal(err)
		}
	}
}
