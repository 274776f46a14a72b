package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
)

// newNode returns a fake node for a test's commands to program: testApp
// opens a real Dataplane on it, and the test reads what the commands
// left in its kernel.
func newNode(t *testing.T) *dataplanetest.Node {
	t.Helper()
	n, err := dataplanetest.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeState prints everything the node's kernel holds (virtual and real
// servers, IPVS timeouts, sets, links and their addresses, rules,
// sysctls), to compare whole and to show in failures.
func nodeState(t *testing.T, n *dataplanetest.Node) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "ipvs:\n%stimeouts %+v\nsets:\n%slinks:\n%srules:\n%ssysctls:\n",
		n.IPVS.Dump(), n.IPVS.Timeouts(), n.Sets.Dump(), n.Links.Dump(), n.Rules.Dump())
	err := filepath.WalkDir(n.ProcSys, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		value, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s = %s\n", strings.TrimPrefix(path, n.ProcSys+"/"), bytes.TrimSpace(value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// untouched fails the test unless the node holds what a fresh one does:
// what a command that failed, or must not write, leaves. what names the
// command in the failure.
func untouched(t *testing.T, n *dataplanetest.Node, what any) {
	t.Helper()
	if got, fresh := nodeState(t, n), nodeState(t, newNode(t)); got != fresh {
		t.Errorf("%v changed the node; it holds:\n%s", what, got)
	}
}

// realServers returns the real servers of the node's virtual server vip
// ("TCP 10.96.0.80:80"), sorted, and whether there is one.
func realServers(n *dataplanetest.Node, vip string) ([]string, bool) {
	for _, vs := range n.IPVS.Table() {
		if vs.Service.String() != vip {
			continue
		}
		rs := []string{}
		for _, d := range vs.Destinations {
			rs = append(rs, d.String())
		}
		slices.Sort(rs)
		return rs, true
	}
	return nil, false
}

// serves fails the test unless the node's virtual server vip has the
// real servers want, and no others.
func serves(t *testing.T, n *dataplanetest.Node, vip string, want ...string) {
	t.Helper()
	if got, ok := realServers(n, vip); !ok || !slices.Equal(got, want) {
		t.Errorf("virtual server %s: real servers %v, want %v; the node's IPVS:\n%s", vip, got, want, n.IPVS.Dump())
	}
}

// webServed fails the test unless the node serves the web Service.
func webServed(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	serves(t, n, webVIP, webEndpoint)
}

// nothingProgrammed fails the test if the node holds anything ipvsplane
// makes: a virtual server, a link, a set or a rules table.
func nothingProgrammed(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	if len(n.IPVS.Table()) > 0 || n.Links.Dump() != "" || len(n.Sets.Names()) > 0 || len(n.Rules.Tables()) > 0 {
		t.Errorf("the node holds what ipvsplane makes:\n%s", nodeState(t, n))
	}
}

// sysctl returns the value of the node's sysctl name
// ("net/ipv4/ip_forward").
func sysctl(t *testing.T, n *dataplanetest.Node, name string) string {
	t.Helper()
	value, err := os.ReadFile(filepath.Join(n.ProcSys, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(value))
}

// lackingScheduler is a node's Dataplane whose kernel lacks the module of
// one IPVS scheduler. The fake IPVS loads every scheduler a stock kernel
// has, and dataplanetest cannot make a node without one, so this stands
// in for CheckScheduler's answer alone.
type lackingScheduler struct {
	*dataplane.Dataplane
	name string
}

func (k lackingScheduler) CheckScheduler(ctx context.Context, name string) error {
	if name == k.name {
		return fmt.Errorf("dataplane: check IPVS scheduler %s: %w: load its kernel module, ip_vs_%s", name, dataplane.ErrSchedulerNotSupported, name)
	}
	return k.Dataplane.CheckScheduler(ctx, name)
}

// withoutScheduler has a's commands open n's Dataplane as one whose
// kernel lacks scheduler name.
func withoutScheduler(a *app, n *dataplanetest.Node, name string) {
	a.newKernel = func(cfg *dataplane.Config) (kernel, error) {
		d, err := n.Open(cfg)
		if err != nil {
			return nil, err
		}
		return lackingScheduler{Dataplane: d, name: name}, nil
	}
}

// webManifest is the Service and EndpointSlice most tests feed: its
// cluster IP's virtual server is webVIP, with webEndpoint.
const webManifest = kubetest.WebManifest

const (
	webVIP      = "TCP 10.96.0.80:80"
	webEndpoint = "10.244.1.10:8080"
)
