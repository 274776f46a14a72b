//go:build hosttest && !vmtest

package main

import (
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The host kernel has no IPVS: every command that programs the kernel
// refuses to start, naming the module, and changes nothing.
func TestRefusesWithoutIPVS(t *testing.T) {
	ns := testutil.NewNetNS(t)
	for _, args := range [][]string{
		{"run", "--source=files", "--manifests=testdata/demo", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="},
		{"apply", "--once", "--source=files", "--manifests=testdata/demo"},
		{"plan", "--source=files", "--manifests=testdata/demo"},
		{"cleanup", "--state-file="},
	} {
		out, err := ipvsplane(t, ns, args...)
		if err == nil || !strings.Contains(out, "the kernel has no IPVS: load the ip_vs module") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if out := ns.Run(t, "ip", "-o", "link"); strings.Contains(out, "kube-ipvs0") {
		t.Errorf("a device was made:\n%s", out)
	}
}
