//go:build vmtest

package dataplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// The fakes stay honest: the syncs the unit tests run on a
// dataplanetest.Node, run on a real kernel (a network namespace in the
// VM) too, plan the same operations and leave the same state, read back
// from both through the same library calls: the IPVS table, the sets and
// their entries, the device's addresses, the rule tables and chains, and
// the sysctls.
func TestFakeNodeMatchesKernel(t *testing.T) {
	testutil.RequireVM(t)
	ctx := context.Background()
	netns := testutil.NewNetNS(t)
	now := time.Unix(1_800_000_000, 0)
	cfg := &dataplane.Config{NetNS: netns.FD(), DrainTimeout: 10 * time.Second, Now: func() time.Time { return now }}
	real, err := dataplane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	fake, n := newFakeDataplane(t, cfg)

	web := fixture.Web()
	sticky := fixture.Svc("default", "sticky", "", inet.TCP, 80, "10.96.0.11")
	sticky.SessionAffinity = time.Hour
	sticky.Endpoints = web.Endpoints
	lb := fixture.Svc("default", "lb", "", inet.UDP, 53, "10.96.0.12", "fd00:96::12")
	lb.NodePort = 30053
	lb.LoadBalancerIPs = fixture.IPs("203.0.113.10")
	lb.LoadBalancerSourceRanges = fixture.Prefixes("192.168.0.0/24")
	lb.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.3", 5353, "node-a"), fixture.Ready("fd00:244::3", 5353, "node-a")}
	local := fixture.Svc("default", "local", "", inet.TCP, 80, "10.96.0.13")
	local.NodePort = 30082
	local.ExternalPolicy = model.PolicyLocal
	local.HealthCheckNodePort = 32000
	local.Endpoints = web.Endpoints
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{web, sticky, lb, local}}

	for _, step := range []struct {
		name   string
		change func()
	}{
		{"first sync", func() {}},
		{"an endpoint leaves", func() { state.Services[0].Endpoints = web.Endpoints[:1] }},
		{"a service port leaves", func() { state.Services = slices.Delete(state.Services, 1, 2) }},
		{"the node masquerades all", func() { state.Node.MasqueradeAll = true; state.Node.StrictARP = true }},
		{"nothing changes", func() {}},
		{"every service port leaves", func() { state.Services = nil }},
	} {
		step.change()
		now = now.Add(time.Second)
		realRes, err := real.Sync(ctx, state)
		if err != nil {
			t.Fatalf("%s: kernel: %v", step.name, err)
		}
		fakeRes, err := fake.Sync(ctx, state)
		if err != nil {
			t.Fatalf("%s: fake: %v", step.name, err)
		}
		if len(realRes.Errors)+len(fakeRes.Errors) > 0 {
			t.Errorf("%s: errors: kernel %v, fake %v", step.name, realRes.Errors, fakeRes.Errors)
		}
		if got, want := fakeRes.Plan.String(), realRes.Plan.String(); got != want {
			t.Errorf("%s: the fake's plan differs from the kernel's:\n%s", step.name, lineDiff(want, got))
		}
		want := kernelView(t, ctx, hostConns(t, netns.FD()), &state.Node, func(name string) string {
			return netns.Run(t, "sysctl", "-n", strings.ReplaceAll(name, "/", "."))
		})
		got := kernelView(t, ctx, fakeConns(t, n), &state.Node, func(name string) string {
			b, err := os.ReadFile(filepath.Join(n.ProcSys, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		})
		if got != want {
			t.Errorf("%s: the fake holds other state than the kernel:\n%s", step.name, lineDiff(want, got))
		} else {
			t.Logf("%s: %d operations, %d lines of state agree", step.name, realRes.Plan.Len(), strings.Count(want, "\n")+1)
		}
	}
}

// conns are the connections a kernel is read back through.
type conns struct {
	ipvs  *ipvs.Conn
	sets  *ipset.Conn
	links *dummy.Conn
	rules *nftables.Conn
}

func hostConns(t *testing.T, netns int) conns {
	var c conns
	var err error
	if c.ipvs, err = ipvs.Dial(&ipvs.Config{NetNS: netns}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ipvs.Close() })
	if c.sets, err = ipset.Dial(&ipset.Config{NetNS: netns}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.sets.Close() })
	if c.links, err = dummy.Dial(&dummy.Config{NetNS: netns}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.links.Close() })
	if c.rules, err = nftables.New(nftables.WithNetNSFd(netns)); err != nil {
		t.Fatal(err)
	}
	return c
}

func fakeConns(t *testing.T, n *dataplanetest.Node) conns {
	c := conns{ipvs: n.IPVS.Dial(), links: n.Links.Dial(), sets: n.Sets.Dial(), rules: n.Rules.Dial()}
	t.Cleanup(func() { c.ipvs.Close(); c.links.Close(); c.sets.Close() })
	return c
}

// kernelView prints what a kernel holds of what a Dataplane programs, in
// an order of its own, and the node's sysctls as sysctl reads them.
func kernelView(t *testing.T, ctx context.Context, c conns, node *model.Node, sysctl func(name string) string) string {
	t.Helper()
	var lines []string
	table, err := c.ipvs.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range table {
		s := vs.Service
		lines = append(lines, fmt.Sprintf("ipvs %v %s flags %#x timeout %v", s, s.Scheduler, uint32(s.Flags), s.Timeout))
		for _, d := range vs.Destinations {
			lines = append(lines, fmt.Sprintf("ipvs %v -> %v %v weight %d", s, d, d.Forward, d.Weight))
		}
	}
	names, err := c.sets.Names(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		h, entries, err := c.sets.List(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		// What ipsettest does not model, and varies with the kernel.
		h.Entries, h.References, h.MemSize, h.InitVal, h.BucketSize = 0, 0, 0, 0, 0
		if err := ipset.WriteSave(&b, h, entries); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(b.String()) {
			lines = append(lines, "ipset "+strings.TrimSpace(line))
		}
	}
	if dev, err := c.links.Get(ctx, dataplane.DefaultDevice); err == nil {
		addrs, err := dev.Addresses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if !a.IsLinkLocalUnicast() {
				lines = append(lines, "address "+a.String())
			}
		}
	}
	lines = append(lines, rulesView(t, c.rules, node)...)
	for _, s := range node.Sysctls() {
		lines = append(lines, fmt.Sprintf("sysctl %s = %s", s.Name, strings.TrimSpace(sysctl(s.Name))))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// rulesView lists the tables, chains and rule counts, and whether the
// rules are those node calls for.
func rulesView(t *testing.T, c *nftables.Conn, node *model.Node) []string {
	t.Helper()
	current, err := nftrules.Current(c, node)
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{fmt.Sprintf("rules current %v", current)}
	chains, err := c.ListChains()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chains {
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("chain %d %s %s: %d rules", ch.Table.Family, ch.Table.Name, ch.Name, len(rules)))
	}
	return lines
}

// lineDiff lists the lines only one of want and got has.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "- %s (kernel only)\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+ %s (fake only)\n", l)
		}
	}
	return b.String()
}
