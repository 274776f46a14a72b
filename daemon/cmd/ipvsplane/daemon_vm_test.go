//go:build vmtest

package main

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// The daemon against the demo's manifests: real traffic, health and
// metrics, a manifest change programmed within minSyncPeriod plus a
// second, a clean stop, and a cleanup that leaves another program's
// virtual server alone.
func TestDaemonEndToEnd(t *testing.T) {
	n := setupNet(t)
	ctx := context.Background()
	ic, err := ipvs.Dial(&ipvs.Config{NetNS: n.node.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	foreign := ipvs.Service{Protocol: inet.UDP, Addr: netip.MustParseAddr("10.0.0.99"), Port: 53, Scheduler: "wlc"}
	if err := ic.CreateService(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	dir := copyManifests(t)
	d := startDaemon(t, n.node, dir)
	d.WaitSynced(t, 2*time.Minute)

	t.Run("cluster IP spreads over both backends, masqueraded", func(t *testing.T) {
		counts, peers := spread(t, n.client, "10.96.0.10:80", 6)
		if counts["backend-1"] == 0 || counts["backend-2"] == 0 {
			t.Errorf("round robin reached %v", counts)
		}
		if peers["192.168.0.2"] {
			t.Errorf("a backend saw the client's own address: %v", peers)
		}
	})
	t.Run("node port", func(t *testing.T) {
		if counts, _ := spread(t, n.client, "192.168.0.1:30080", 6); len(counts) != 2 {
			t.Errorf("node port reached %v", counts)
		}
	})
	t.Run("affinity", func(t *testing.T) {
		if counts, _ := spread(t, n.client, "10.96.0.11:9000", 4); len(counts) != 1 {
			t.Errorf("ClientIP affinity spread over %v", counts)
		}
	})
	t.Run("load balancer with externalTrafficPolicy Local", func(t *testing.T) {
		n.client.IP(t, "route", "add", "203.0.113.10/32", "via", "192.168.0.1")
		counts, peers := spread(t, n.client, "203.0.113.10:443", 4)
		if len(counts) != 1 || counts["backend-1"] != 4 || !peers["192.168.0.2"] {
			t.Errorf("want only the local backend-1, seeing the client's address; got %v from %v", counts, peers)
		}
		code, body, err := httpGet(n.client, "192.168.0.1:32000", "/")
		if err != nil || code != 200 || !strings.Contains(body, `"localEndpoints": 1,`) {
			t.Errorf("health-check node port: %d %s %v", code, body, err)
		}
	})
	t.Run("healthz and metrics", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez"} {
			if code, body, err := httpGet(n.node, "127.0.0.1:10256", path); err != nil || code != 200 || !strings.Contains(body, `"healthy":true`) ||
				strings.Contains(body, `"nodeEligible":true`) != (path == "/healthz") {
				t.Errorf("%s: %d %s %v", path, code, body, err)
			}
		}
		if code, body, err := httpGet(n.node, "127.0.0.1:10249", "/proxyMode"); err != nil || code != 200 || body != "ipvs" {
			t.Errorf("/proxyMode: %d %q %v", code, body, err)
		}
		code, body, err := httpGet(n.node, "127.0.0.1:10249", "/metrics")
		if err != nil || code != 200 {
			t.Fatalf("/metrics: %d %v", code, err)
		}
		for _, want := range []string{`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} `, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"}`,
			`kubeproxy_proxy_healthz_total{code="200"} 1`, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"} 0`, "ipvsplane_sync_operations_total{op=\"add_virtual\"}"} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
	t.Run("a node the autoscaler is deleting fails /healthz, not /livez", func(t *testing.T) {
		node := readFile(t, "testdata/demo/node.yaml")
		tainted := strings.Replace(node, "status:", "spec:\n  taints:\n  - {key: ToBeDeletedByClusterAutoscaler, value: \"1700000000\", effect: NoSchedule}\nstatus:", 1)
		writeFile(t, filepath.Join(dir, "node.yaml"), tainted)
		defer writeFile(t, filepath.Join(dir, "node.yaml"), node)
		var code int
		var body string
		if _, ok := waitFor(5*time.Second, func() bool {
			code, body, _ = httpGet(n.node, "127.0.0.1:10256", "/healthz")
			return code == 503
		}); !ok || !strings.Contains(body, `"nodeEligible":false`) || !strings.Contains(body, `"healthy":true`) {
			t.Errorf("/healthz of a tainted node: %d %s", code, body)
		}
		if code, body, err := httpGet(n.node, "127.0.0.1:10256", "/livez"); err != nil || code != 200 {
			t.Errorf("/livez of a tainted node: %d %s %v", code, body, err)
		}
	})
	t.Run("status", func(t *testing.T) {
		out, err := ipvsplane(t, n.node, "status", "--state-file", d.StateFile)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"node node-a (source files", "demo/web:http", "TCP 10.96.0.10:80", "10.244.1.2:8080", "KUBE-CLUSTER-IP", "[not ipvsplane's]"} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("plan against the programmed kernel", func(t *testing.T) {
		out, err := ipvsplane(t, n.node, "plan", "--source=files", "--manifests", dir, "--hostname-override=node-a", "--cluster-cidr=10.244.0.0/16")
		if err != nil || !strings.Contains(out, "no changes") {
			t.Errorf("plan: %v\n%s", err, out)
		}
	})
	t.Run("a manifest change takes effect within minSyncPeriod plus a second", func(t *testing.T) {
		const limit = time.Second + time.Second
		addr := netip.MustParseAddr("10.96.0.20")
		start := time.Now()
		writeFile(t, filepath.Join(dir, "new.yaml"), strings.NewReplacer("name: web", "name: new", "10.96.0.10", "10.96.0.20",
			"web-abc12", "new-1", "service-name: web", "service-name: new", "nodePort: 30080", "nodePort: 30090").Replace(readFile(t, "testdata/demo/web.yaml")))
		var took time.Duration
		// Programmed: the virtual server with both real servers, and its
		// address bound, which the same sync does a moment later.
		for took = time.Since(start); took < limit; took = time.Since(start) {
			s, err := ic.GetService(ctx, ipvs.Service{Protocol: inet.TCP, Addr: addr, Port: 80})
			if err == nil {
				dests, _ := ic.Destinations(ctx, s)
				if len(dests) == 2 && strings.Contains(n.node.Run(t, "ip", "-o", "addr", "show", "dev", "kube-ipvs0"), " "+addr.String()+"/32 ") {
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("manifest change to kernel: %v", took.Round(time.Millisecond))
		if took >= limit {
			t.Fatalf("the new service was not programmed within %v", limit)
		}
		if counts, _ := spread(t, n.client, "10.96.0.20:80", 4); len(counts) != 2 {
			t.Errorf("the new service reached %v", counts)
		}
		// Removing the file removes the service.
		if err := os.Remove(filepath.Join(dir, "new.yaml")); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		for time.Since(start) < limit {
			if _, err := ic.GetService(ctx, ipvs.Service{Protocol: inet.TCP, Addr: addr, Port: 80}); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("the removed service is still there after %v", limit)
	})

	if err := d.Stop(); err != nil {
		t.Fatalf("the daemon's exit: %v\n%s", err, d.Out.String())
	}
	if table := ipvsTable(t, n.node); len(table) < 5 {
		t.Errorf("after the daemon stopped, %d virtual servers are left; the kernel should keep its state", len(table))
	}

	out, err := ipvsplane(t, n.node, "cleanup", "--state-file", d.StateFile)
	if err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	assertClean(t, n.node, foreign)
	if _, err := os.Stat(d.StateFile); !os.IsNotExist(err) {
		t.Errorf("the state file is still there: %v", err)
	}

	// apply --once programs the same state in one go; a document it
	// cannot use makes it fail, after programming the rest.
	out, err = ipvsplane(t, n.node, "apply", "--once", "--source=files", "--manifests", dir, "--hostname-override=node-a", "--cluster-cidr=10.244.0.0/16")
	if err != nil {
		t.Fatalf("apply --once: %v\n%s", err, out)
	}
	if counts, _ := spread(t, n.client, "10.96.0.10:80", 4); len(counts) != 2 {
		t.Errorf("after apply --once the cluster IP reached %v", counts)
	}
	writeFile(t, filepath.Join(dir, "broken.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: broken}\nspec: {portz: []}\n")
	out, err = ipvsplane(t, n.node, "apply", "--once", "--source=files", "--manifests", dir, "--hostname-override=node-a")
	if err == nil || !strings.Contains(out, "broken.yaml") {
		t.Errorf("apply --once with an invalid document: %v\n%s", err, out)
	}
	if out, err := ipvsplane(t, n.node, "cleanup"); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	assertClean(t, n.node, foreign)
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// assertClean checks that nothing of ipvsplane's is left in the
// namespace, and that the foreign virtual server is.
func assertClean(t *testing.T, ns *testutil.NetNS, foreign ipvs.Service) {
	t.Helper()
	ctx := context.Background()
	var left []string
	for _, vs := range ipvsTable(t, ns) {
		left = append(left, vs.Service.String())
	}
	if want := []string{foreign.String()}; !slices.Equal(left, want) {
		t.Errorf("virtual servers after cleanup: %v, want only %v", left, want)
	}
	dc, err := dummy.Dial(&dummy.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if _, err := dc.Get(ctx, "kube-ipvs0"); err == nil {
		t.Error("kube-ipvs0 is still there")
	}
	sc, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if names, err := sc.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("sets after cleanup: %v %v", names, err)
	}
	testutil.RequireProgram(t, "nft")
	if out := ns.Run(t, "nft", "list", "tables"); strings.Contains(out, "ipvsplane") {
		t.Errorf("nftables after cleanup:\n%s", out)
	}
}
