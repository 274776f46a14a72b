// Package hostsets creates the KUBE-* ipsets in a test's network namespace
// with the ipset program, for host tests that load rules matching them.
package hostsets

import (
	"maps"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/planner"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// Create creates every KUBE-* set in ns and returns their indexes: in a
// fresh namespace the kernel numbers sets in the order they are created.
func Create(t testing.TB, ns *testutil.NetNS) map[string]uint16 {
	t.Helper()
	testutil.RequireProgram(t, "ipset")
	specs := planner.SetSpecs()
	index := map[string]uint16{}
	for i, name := range slices.Sorted(maps.Keys(specs)) {
		spec := specs[name]
		args := []string{"create", name, string(spec.Type)}
		switch {
		case spec.Type == planner.BitmapPort:
			args = append(args, "range", "0-65535")
		case spec.Family == inet.IPv6:
			args = append(args, "family", "inet6")
		}
		ns.Run(t, "ipset", args...)
		index[name] = uint16(i)
	}
	return index
}
