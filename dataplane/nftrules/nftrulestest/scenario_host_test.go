//go:build hosttest

package nftrulestest_test

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/dataplane/internal/hostsets"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The fake stays honest: the same scenario on a kernel, in a fresh
// namespace whose KUBE-* sets the rules match, has the same outcomes and
// leaves, step by step, the same ruleset as read back through
// google/nftables.
func TestScenarioMatchesKernel(t *testing.T) {
	ns := testutil.NewNetNS(t)
	index := hostsets.Create(t, ns)
	byName := func(name string) (uint16, error) { return index[name], nil }

	kc, err := nftables.New(nftables.WithNetNSFd(ns.FD()), nftables.AsLasting())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.CloseLasting()
	onKernel := scenario(t, kc, byName)

	sets := len(index)
	fc := nftrulestest.New(&nftrulestest.Options{SetExists: func(i uint16) bool { return int(i) < sets }}).Dial()
	onFake := scenario(t, fc, byName)

	if n := strings.Count(onKernel[2].ruleset, "\nrule "); n < 40 {
		t.Fatalf("the kernel holds %d rules after the write:\n%s", n, onKernel[2].ruleset)
	}
	for i := range onKernel {
		k, f := onKernel[i], onFake[i]
		if k.outcome != f.outcome {
			t.Errorf("step %d: the kernel: %s; the fake: %s", i, k.outcome, f.outcome)
		}
		if k.ruleset != f.ruleset {
			t.Errorf("after %q, the kernel holds:\n%s\nthe fake:\n%s", k.outcome, k.ruleset, f.ruleset)
		}
	}
}
