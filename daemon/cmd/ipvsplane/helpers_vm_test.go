//go:build vmtest

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/daemontest"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// testNet is the demo's network. The node is a namespace of its own (the
// daemon runs in it); the client and the backends sit behind veth pairs.
//
//	client 192.168.0.2 --- n-c 192.168.0.1 [node-a] n-b1 10.244.1.1 --- backend-1 10.244.1.2 (on node-a)
//	                                                n-b2 10.244.2.1 --- backend-2 10.244.2.2 (on node-b)
//	                                                n-b3 10.244.3.1 --- backend-3 10.244.3.2 (on node-b)
type testNet struct {
	node, client *testutil.NetNS
	backends     []*testutil.NetNS
}

func setupNet(t *testing.T) *testNet {
	t.Helper()
	testutil.RequireVM(t)
	n := &testNet{node: testutil.NewNetNS(t), client: testutil.NewNetNS(t)}
	n.node.Link(t, "n-c", n.client, "c0", "192.168.0.1/24", "192.168.0.2/24")
	for i := 1; i <= 3; i++ {
		b := testutil.NewNetNS(t)
		n.node.Link(t, fmt.Sprintf("n-b%d", i), b, "b0", fmt.Sprintf("10.244.%d.1/24", i), fmt.Sprintf("10.244.%d.2/24", i))
		b.ServeTCP(t, fmt.Sprintf("10.244.%d.2:8080", i), fmt.Sprintf("backend-%d", i))
		n.backends = append(n.backends, b)
	}
	return n
}

// copyManifests copies the demo's manifests into a directory of the test's.
func copyManifests(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob("testdata/demo/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in testdata/demo: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, filepath.Base(f)), string(data))
	}
	return dir
}

// writeFile replaces a file in one rename, as editors and kubectl-like
// tools do, so the watcher never reads half of it.
func writeFile(t testing.TB, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// daemonProc is a running `ipvsplane run`.
type daemonProc = daemontest.Daemon

// startDaemon starts the daemon in the node's namespace on the manifests
// in dir; it is stopped when the test ends.
func startDaemon(t testing.TB, ns *testutil.NetNS, dir string, extra ...string) *daemonProc {
	t.Helper()
	stateFile := filepath.Join(t.TempDir(), "status.json")
	args := append([]string{"run", "--source=files", "--manifests", dir, "--hostname-override=node-a",
		"--cluster-cidr=10.244.0.0/16", "--ipvs-min-sync-period=1s", "--ipvs-sync-period=30s",
		"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249",
		"--state-file", stateFile}, extra...)
	d, err := daemontest.Start(command(t, ns, args...), ns, stateFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("daemon output:\n%s", d.Out.String())
		}
	})
	return d
}

// httpGet fetches a URL from inside ns. The connection is dialled in the
// namespace: http.Client dials from goroutines of its own, which would be
// in the wrong namespace.
func httpGet(ns *testutil.NetNS, addr, path string) (int, string, error) {
	c, err := ns.Connect(addr, 3*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// spread sends n connections to addr from the client and counts the
// backends that answered, and the client addresses they saw.
func spread(t testing.TB, client *testutil.NetNS, addr string, n int) (map[string]int, map[string]bool) {
	t.Helper()
	counts, peers := map[string]int{}, map[string]bool{}
	for range n {
		reply, err := client.DialTCP("", addr, 3*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		name, peer, _ := strings.Cut(reply, " ")
		host, _, _ := net.SplitHostPort(peer)
		counts[name]++
		peers[host] = true
	}
	return counts, peers
}

// ipvsTable reads the node's IPVS table.
func ipvsTable(t testing.TB, ns *testutil.NetNS) []ipvs.VirtualServer {
	t.Helper()
	c, err := ipvs.Dial(&ipvs.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, err := c.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return table
}
