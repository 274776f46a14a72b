package dataplane

import ns "github.com/ipvsplane/ipvsplane/dataplane/internal/namespace"

// The seam through which dataplane/dataplanetest opens a real Dataplane
// on the kernel packages' fakes.
func init() {
	ns.Open = func(cfg any, n *ns.Namespace) (any, error) {
		return openDataplane(cfg.(*Config), n)
	}
}
