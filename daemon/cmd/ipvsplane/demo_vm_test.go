//go:build vmtest

package main

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// TestDemo is `make demo`: the daemon on the example manifests in
// testdata/demo, real requests through a cluster IP, a node port and a
// load balancer, then ipvsplane status, the IPVS table as ipvsadm prints
// it, and how the requests were spread. It prints for a reader, on
// standard output.
func TestDemo(t *testing.T) {
	out := os.Stdout
	section := func(title string) { fmt.Fprintf(out, "\n=== %s ===\n", title) }
	n := setupNet(t)
	dir := copyManifests(t)

	section("the node")
	fmt.Fprintln(out, `This VM runs Linux with IPVS. Network namespaces stand in for the machines:
  node-a     192.168.0.1   runs ipvsplane
  client     192.168.0.2   sends the requests
  backend-1  10.244.1.2    a pod on node-a
  backend-2  10.244.2.2    a pod on node-b
  backend-3  10.244.3.2    a pod on node-b
Each backend answers a TCP connection with its name and the client address it sees.`)
	section("the manifests (testdata/demo)")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		for _, line := range strings.Split(readFile(t, f), "\n") {
			if strings.HasPrefix(line, "# ") {
				fmt.Fprintf(out, "%-10s %s\n", filepath.Base(f)+":", strings.TrimPrefix(line, "# "))
			}
		}
	}

	section("ipvsplane run --source=files")
	start := time.Now()
	d := startDaemon(t, n.node, dir)
	took := d.WaitSynced(t, 2*time.Minute)
	fmt.Fprintf(out, "first sync done %v after the start; the daemon's log so far:\n", took.Round(time.Millisecond))
	for _, line := range strings.Split(strings.TrimSpace(d.Out.String()), "\n") {
		fmt.Fprintln(out, "  "+line)
	}

	report := func(title, addr string, conns int) {
		counts, peers := spread(t, n.client, addr, conns)
		fmt.Fprintf(out, "%-58s", fmt.Sprintf("%s, %d connections to %s:", title, conns, addr))
		for _, name := range slices.SortedFunc(maps.Keys(counts), cmp.Compare) {
			fmt.Fprintf(out, "  %s %d", name, counts[name])
		}
		fmt.Fprintf(out, "   (backends saw the client as %s)\n", strings.Join(slices.Sorted(maps.Keys(peers)), ", "))
	}
	section("requests from the client")
	report("ClusterIP demo/web", "10.96.0.10:80", 12)
	report("NodePort demo/web", "192.168.0.1:30080", 12)
	report("ClusterIP demo/api (ClientIP affinity)", "10.96.0.11:9000", 12)
	n.client.IP(t, "route", "add", "203.0.113.10/32", "via", "192.168.0.1")
	report("LoadBalancer demo/shop (externalTrafficPolicy Local)", "203.0.113.10:443", 12)
	code, body, err := httpGet(n.client, "192.168.0.1:32000", "/")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "health-check node port of demo/shop, http://192.168.0.1:32000/: %d %s\n", code, body)

	section("a manifest change: backend-2 leaves demo/web")
	web := strings.Replace(readFile(t, "testdata/demo/web.yaml"), "- addresses: [10.244.2.2]\n  nodeName: node-b\n  conditions: {ready: true}\n", "", 1)
	changed := time.Now()
	writeFile(t, filepath.Join(dir, "web.yaml"), web)
	fmt.Fprintf(out, "web.yaml rewritten without 10.244.2.2; ")
	for !backendGone(t, n, "10.96.0.10", 80, "10.244.2.2") {
		if time.Since(changed) > time.Minute {
			t.Fatal("the change was not programmed within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintf(out, "the kernel had it %v later (backend-2 now drains at weight 0)\n", time.Since(changed).Round(time.Millisecond))
	report("ClusterIP demo/web", "10.96.0.10:80", 12)

	section("ipvsplane status")
	status, err := ipvsplane(t, n.node, "status", "--state-file", d.StateFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, status)
	}
	fmt.Fprint(out, status)

	section("ipvsadm -Ln (the kernel's IPVS table, read independently)")
	testutil.RequireProgram(t, "ipvsadm")
	fmt.Fprint(out, n.node.Run(t, "ipvsadm", "-Ln"))

	section("done")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(out, "the demo took %v in the VM; the daemon stopped on SIGTERM and left the kernel as it was\n", time.Since(start).Round(time.Second))
}

// backendGone reports whether a real server is gone from a virtual server,
// or draining at weight 0.
func backendGone(t *testing.T, n *testNet, vip string, port uint16, real string) bool {
	for _, vs := range ipvsTable(t, n.node) {
		if vs.Service.Addr.String() != vip || vs.Service.Port != port {
			continue
		}
		for _, d := range vs.Destinations {
			if d.Addr.String() == real && d.Weight > 0 {
				return false
			}
		}
	}
	return true
}
