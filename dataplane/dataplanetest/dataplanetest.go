// Package dataplanetest gives importers of package dataplane a real
// *dataplane.Dataplane whose network namespace is in memory, so that a
// program built on it (a proxy, a controller, a CNI) can be unit-tested
// whole, Sync after Sync, without privileges, kernel modules or a VM.
//
// New makes a Node: the kernel packages' public fakes (ipvstest,
// ipsettest, dummytest, conntracktest and nftrulestest, whose set
// matches are checked against the ipset fake) and a /proc/sys and
// /proc/net in a directory. Node.Open returns a Dataplane on it; every
// request the Dataplane makes goes through the kernel packages' own
// encoders, decoders and netlink exchange, as on a host: only the sockets
// are fake. The Node's fields show what was programmed, change it behind
// the Dataplane's back, or stand in for traffic (ipvstest's
// SetConnections, conntracktest's Add).
//
// What the Node does not model is what its fakes do not (see each
// package's documentation), and the host around the namespace: a Node
// has no other interfaces, routes or programs, and only the sysctls
// package dataplane writes exist under its /proc/sys.
package dataplanetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/conntracktest"
	"github.com/ipvsplane/ipvsplane/dataplane"
	ns "github.com/ipvsplane/ipvsplane/dataplane/internal/namespace"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
)

// Options tune a Node; the zero value is a dual-stack node running Linux
// 6.1.
type Options struct {
	// WithoutIPv6 makes the node one booted with ipv6.disable=1: a
	// Dataplane then serves IPv4 alone.
	WithoutIPv6 bool
	// Release is the kernel's release (uname -r); "6.1.0" if empty. One
	// before 5.9 makes the Dataplane set net/ipv4/vs/conn_reuse_mode, as
	// kube-proxy does.
	Release string
}

// Node is one network namespace in memory. Dataplanes opened on it share
// it, as processes in one namespace share its kernel.
type Node struct {
	IPVS  *ipvstest.Kernel
	Sets  *ipsettest.Kernel
	Links *dummytest.Kernel
	Flows *conntracktest.Kernel
	Rules *nftrulestest.Kernel
	// ProcSys is the directory standing for the namespace's /proc/sys,
	// where a Dataplane writes its sysctls: read a file below it to see
	// one (net/ipv4/ip_forward, say).
	ProcSys string

	procNet string
	release string
}

// New returns a Node whose /proc/sys and /proc/net are made in dir,
// which must exist (a test's t.TempDir()). opts may be nil.
func New(dir string, opts *Options) (*Node, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Release == "" {
		o.Release = "6.1.0"
	}
	n := &Node{
		IPVS:    ipvstest.New(nil),
		Sets:    ipsettest.New(nil),
		Links:   dummytest.New(nil),
		Flows:   conntracktest.New(nil),
		ProcSys: filepath.Join(dir, "sys"),
		procNet: filepath.Join(dir, "net"),
		release: o.Release,
	}
	// The rules' set matches name sets by their kernel index, and the
	// kernel's set match refuses one that does not exist.
	n.Rules = nftrulestest.New(&nftrulestest.Options{SetExists: n.Sets.HasIndex})
	if err := n.makeProc(!o.WithoutIPv6); err != nil {
		return nil, fmt.Errorf("dataplanetest: %w", err)
	}
	return n, nil
}

// makeProc writes the sysctls package dataplane may set, each 0 but
// conn_reuse_mode (1, as in a kernel), and
// /proc/net's if_inet6 on a node with IPv6.
func (n *Node) makeProc(ipv6 bool) error {
	names := []string{"net/ipv4/vs/conn_reuse_mode", "net/ipv6/conf/all/disable_ipv6"}
	for _, s := range (&model.Node{StrictARP: true}).Sysctls() {
		names = append(names, s.Name)
	}
	disabled := "1\n"
	if ipv6 {
		disabled = "0\n"
	}
	var errs []error
	for _, name := range names {
		path := filepath.Join(n.ProcSys, name)
		value := "0\n"
		switch name {
		case "net/ipv6/conf/all/disable_ipv6":
			value = disabled
		case "net/ipv4/vs/conn_reuse_mode":
			value = "1\n" // the kernel's default
		}
		errs = append(errs, os.MkdirAll(filepath.Dir(path), 0o755), os.WriteFile(path, []byte(value), 0o644))
	}
	errs = append(errs, os.MkdirAll(n.procNet, 0o755))
	if ipv6 {
		errs = append(errs, os.WriteFile(filepath.Join(n.procNet, "if_inet6"), nil, 0o644))
	}
	return errors.Join(errs...)
}

// Open returns a Dataplane on the node, as dataplane.New returns one on
// the host. cfg.NetNS is ignored. cfg may be nil.
func (n *Node) Open(cfg *dataplane.Config) (*dataplane.Dataplane, error) {
	if cfg == nil {
		cfg = &dataplane.Config{}
	}
	d, err := ns.Open(cfg, n.namespace())
	if err != nil {
		return nil, err
	}
	return d.(*dataplane.Dataplane), nil
}

// namespace is how a Dataplane reaches the node.
func (n *Node) namespace() *ns.Namespace {
	return &ns.Namespace{
		DialIPVS:       func() (*ipvs.Conn, error) { return n.IPVS.Dial(), nil },
		DialSets:       func() (*ipset.Conn, error) { return n.Sets.Dial(), nil },
		DialLinks:      func(b dummy.Binding) (*dummy.Conn, error) { return n.Links.DialBinding(b), nil },
		DialRules:      func() (*nftables.Conn, error) { return n.Rules.Dial(), nil },
		DialFlows:      func() (*conntrack.Conn, error) { return n.Flows.Dial(), nil },
		DialGeneration: func() (ns.GenerationReader, error) { return generation{n.Rules}, nil },
		Release:        n.release,
		InProc:         func(fn func(procSys, procNet string) error) error { return fn(n.ProcSys, n.procNet) },
	}
}

// generation reads the fake ruleset's generation.
type generation struct{ k *nftrulestest.Kernel }

func (g generation) Generation(context.Context) (uint32, error) { return g.k.Generation(), nil }
func (generation) Close() error                                 { return nil }
