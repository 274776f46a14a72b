// Package namespace describes how a Dataplane reaches one network
// namespace's kernel, so that package dataplane can open one on the host
// and dataplane/dataplanetest one on the kernel packages' fakes, without
// a test hook in dataplane's API. Being internal to dataplane, it is out
// of importers' reach.
package namespace

import (
	"context"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// Namespace opens connections to one network namespace's kernel and
// reaches its /proc. A Dataplane opens some connections more than once:
// a background read has its own, and the rules' socket is replaced after
// a failed transaction.
type Namespace struct {
	DialIPVS  func() (*ipvs.Conn, error)
	DialSets  func() (*ipset.Conn, error)
	DialLinks func(dummy.Binding) (*dummy.Conn, error)
	// DialRules opens a lasting nftables connection.
	DialRules func() (*nftables.Conn, error)
	DialFlows func() (*conntrack.Conn, error)
	// DialGeneration opens a reader of the nftables ruleset generation.
	DialGeneration func() (GenerationReader, error)
	// Release is the kernel's release, as uname -r prints it.
	Release string
	// InProc runs fn with the paths of the namespace's /proc/sys and
	// /proc/net.
	InProc func(fn func(procSys, procNet string) error) error
}

// GenerationReader reads the nftables ruleset generation, which every
// committed change to any table moves.
type GenerationReader interface {
	Generation(ctx context.Context) (uint32, error)
	Close() error
}

// Open returns a *dataplane.Dataplane (as any: this package cannot name
// the type without an import cycle) for cfg, a *dataplane.Config, in ns.
// Package dataplane sets it once, when it is initialized; nothing else
// writes it.
var Open func(cfg any, ns *Namespace) (any, error)
