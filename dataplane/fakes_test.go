package dataplane

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/conntrack/conntracktest"
	"github.com/ipvsplane/ipvsplane/dataplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules/nftrulestest"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/dummy/dummytest"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/ipset/ipsettest"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
)

// fakeNode is a network namespace made of the kernel packages' public
// fakes, with a /proc/sys and /proc/net in a directory: what a Dataplane
// programs in the unit tests. The VM tests run the same scenarios on
// real kernels.
type fakeNode struct {
	ipvs    *ipvstest.Kernel
	sets    *ipsettest.Kernel
	links   *dummytest.Kernel
	flows   *conntracktest.Kernel
	rules   *nftrulestest.Kernel
	procSys string
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	n := &fakeNode{
		ipvs:    ipvstest.New(nil),
		sets:    ipsettest.New(),
		links:   dummytest.New(nil),
		flows:   conntracktest.New(),
		procSys: filepath.Join(t.TempDir(), "sys"),
	}
	// The rules' set matches name sets by the kernel's index: only a set
	// that exists may be named, as the kernel's xt set match checks.
	n.rules = nftrulestest.New(&nftrulestest.Options{SetExists: n.setExists})
	node := fakeModelNode()
	for _, s := range append(node.Sysctls(), model.Sysctl{Name: "net/ipv6/conf/all/disable_ipv6"}) {
		path := filepath.Join(n.procSys, s.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// setExists reports whether an ipset of kernel index id exists.
func (n *fakeNode) setExists(id uint16) bool {
	c, err := n.sets.Dial()
	if err != nil {
		return false
	}
	defer c.Close()
	for _, name := range n.sets.Names() {
		if got, err := c.Index(context.Background(), name); err == nil && got == id {
			return true
		}
	}
	return false
}

// namespace opens connections on the fakes. Its /proc/net is procSys's
// sibling, which has if_inet6: the node has IPv6.
func (n *fakeNode) namespace(t *testing.T) *namespace {
	procNet := filepath.Join(filepath.Dir(n.procSys), "net")
	if err := os.MkdirAll(procNet, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procNet, "if_inet6"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return &namespace{
		dialIPVS:       func() (*ipvs.Conn, error) { return n.ipvs.Dial(), nil },
		dialSets:       n.sets.Dial,
		dialLinks:      func(b dummy.Binding) (*dummy.Conn, error) { return n.links.Dial(b), nil },
		dialRules:      n.rules.Dial,
		dialFlows:      func() (*conntrack.Conn, error) { return n.flows.Dial(), nil },
		dialGeneration: func() (generationReader, error) { return fakeGeneration{n.rules}, nil },
		release:        "6.1.0-fake",
		inProc:         func(fn func(procSys, procNet string) error) error { return fn(n.procSys, procNet) },
	}
}

// fakeGeneration reads the fake ruleset's generation.
type fakeGeneration struct{ k *nftrulestest.Kernel }

func (g fakeGeneration) generation(context.Context) (uint32, error) { return g.k.Generation(), nil }
func (fakeGeneration) Close() error                                 { return nil }

// newFakeDataplane returns a Dataplane on a new fake node, closed when the
// test ends. cfg may be nil.
func newFakeDataplane(t *testing.T, cfg *Config) (*Dataplane, *fakeNode) {
	t.Helper()
	n := newFakeNode(t)
	d, err := openDataplane(cfg, n.namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d, n
}

// fakeModelNode is the node the fake dataplane tests program.
func fakeModelNode() model.Node {
	return model.Node{
		Name:           "node-a",
		Addresses:      fixture.IPs("192.168.0.1"),
		ClusterCIDRs:   fixture.Prefixes("10.244.0.0/16"),
		MasqueradeMark: 1 << 14,
	}
}

// fakeWeb is a service port with a node port, an external IP and two
// endpoints.
func fakeWeb() model.ServicePort {
	s := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.10")
	s.NodePort = 30080
	s.ExternalIPs = fixture.IPs("198.51.100.10")
	s.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 8080, "node-a"), fixture.Ready("10.244.2.2", 8080, "node-b")}
	return s
}

// syncOK syncs state and fails the test on any failure.
func syncOK(t *testing.T, d *Dataplane, ctx context.Context, state *model.State) *Result {
	t.Helper()
	res, err := d.Sync(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("sync: %v", e)
	}
	return res
}

// checkKernel reads the fake kernel through fresh connections, as a
// restarted ipvsplane would, and fails the test unless a first sync would
// find nothing to do: the kernel holds all that state asks.
func checkKernel(t *testing.T, n *fakeNode, state *model.State) {
	t.Helper()
	d, err := openDataplane(nil, n.namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pl, errs, err := d.DryRun(context.Background(), state)
	if err != nil || len(errs) > 0 {
		t.Fatalf("reading the kernel: %v %v", err, errs)
	}
	if pl.Len() != 0 {
		t.Errorf("the kernel does not hold the state; a first sync would do:\n%s\nIPVS:\n%s\nipsets:\n%s\nlinks:\n%s\nnftables:\n%s",
			pl, n.ipvs.Dump(), n.sets.Dump(), n.links.Dump(), n.rules.Dump())
	}
}
