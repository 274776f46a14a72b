//go:build hosttest && !vmtest

package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// deploy/monitoring's alert rules pass Prometheus' own checks: promtool
// (hack/build-tools builds it from the Prometheus module) checks the
// file, and runs its unit tests (ipvsplane-rules_test.yaml), each alert
// from input series, firing where it must and silent where it must not.
func TestAlertRules(t *testing.T) {
	promtool, err := controlplane.ToolProgram("promtool")
	testutil.Require(t, err == nil, "promtool (run hack/build-tools promtool)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"check", "rules", "ipvsplane-rules.yaml"},
		{"test", "rules", "ipvsplane-rules_test.yaml"},
	} {
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = monitoringDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
