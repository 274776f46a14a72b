//go:build !vmtest

// The VM has no Go toolchain to list packages with.

package dataplane

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// The pure layers import no kernel package and no google/nftables, and the
// rule compiler none of the kernel packages: a controller or a CNI can
// compute and print plans without them. inet, the vocabulary every layer
// shares, is the leaf: it imports nothing of the module and no netlink.
func TestLayersImports(t *testing.T) {
	const module = "github.com/ipvsplane/ipvsplane/"
	kernel := []string{"ipvs", "ipset", "conntrack", "dummy", "linkaddr", "internal/nl"}
	for pkg, banned := range map[string][]string{
		"dataplane/model":    append(slices.Clone(kernel), "github.com/google/nftables", "dataplane/plan", "dataplane/nftrules"),
		"dataplane/plan":     append(slices.Clone(kernel), "github.com/google/nftables", "dataplane/nftrules"),
		"dataplane/nftrules": append(slices.Clone(kernel), "dataplane/plan"),
		"inet":               append(slices.Clone(kernel), "dataplane", "internal", "github.com/google/nftables", "github.com/mdlayher/netlink", "golang.org/x/sys"),
	} {
		for dep := range deps(t, module+pkg) {
			for _, b := range banned {
				if !strings.Contains(b, ".") {
					b = module + b
				}
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}

// deps returns what a package imports, following the module's own
// packages: the others cannot lead back into the module.
func deps(t *testing.T, path string) map[string]bool {
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		p, err := build.Import(queue[0], ".", 0)
		queue = queue[1:]
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range p.Imports {
			if !seen[imp] {
				seen[imp] = true
				if strings.HasPrefix(imp, "github.com/ipvsplane/ipvsplane/") {
					queue = append(queue, imp)
				}
			}
		}
	}
	return seen
}
