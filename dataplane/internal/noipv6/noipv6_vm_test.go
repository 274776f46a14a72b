//go:build vmtest

package noipv6

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// On a kernel booted with ipv6.disable=1 a dual-stack Service's IPv4 side
// is fully served, its cluster IP and node port carrying traffic, and the
// sync reports nothing: no ip6 table, IPv6 address or virtual server is
// tried. (Before, the ip6 table went in the ip one's transaction and took
// it down, and with it, now, every new virtual server.)
func TestIPv4ServedWithoutIPv6(t *testing.T) {
	testutil.RequireVM(t)
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		t.Fatal("the guest kernel has IPv6: testdata/vmtest-cmdline did not reach its command line")
	}
	node, client, backend := testutil.NewNetNS(t), testutil.NewNetNS(t), testutil.NewNetNS(t)
	node.Link(t, "n-c", client, "c0", "192.168.0.1/24", "192.168.0.2/24")
	node.Link(t, "n-b", backend, "b0", "10.244.1.1/24", "10.244.1.2/24")
	backend.ServeTCP(t, "10.244.1.2:8080", "backend-1")

	d := testutil.Open(t, func() (*dataplane.Dataplane, error) { return dataplane.New(&dataplane.Config{NetNS: node.FD()}) })
	if d.IPv6() {
		t.Fatal("the dataplane finds IPv6 on a kernel booted without it")
	}
	web := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.10", "fd00:96::10")
	web.NodePort = 30080
	web.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.2", 8080, "node-a"), fixture.Ready("fd00:244::2", 8080, "node-a")}
	state := &model.State{
		Node: model.Node{Name: "node-a", Addresses: fixture.IPs("192.168.0.1"), NodeIPs: fixture.IPs("192.168.0.1", "fd00::1"),
			ClusterCIDRs: fixture.Prefixes("10.244.0.0/16", "fd00:244::/64"), MasqueradeMark: 1 << 14},
		Services: []model.ServicePort{web},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range 2 {
		res, err := d.Sync(ctx, state)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) > 0 || res.RulesFailed {
			t.Fatalf("sync %d: errors %v (rules failed: %v)\n%s", i, res.Errors, res.RulesFailed, res.Plan)
		}
	}
	for _, addr := range []string{"10.96.0.10:80", "192.168.0.1:30080"} {
		if reply, err := client.DialTCP("", addr, 2*time.Second); err != nil || !strings.HasPrefix(reply, "backend-1 ") {
			t.Errorf("%s answered %q, %v; want backend-1", addr, reply, err)
		}
	}
	if out := node.Run(t, "nft", "list", "tables"); !strings.Contains(out, "table ip ipvsplane") || strings.Contains(out, "ip6") {
		t.Errorf("nftables tables:\n%s", out)
	}
	if out := node.Run(t, "ipvsadm", "-Ln"); strings.Contains(out, "fd00") || !strings.Contains(out, "10.96.0.10:80") {
		t.Errorf("virtual servers:\n%s", out)
	}
}
