package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/ipvs"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// testApp returns an app whose commands open a real Dataplane on node n,
// or fail to with newErr if it is not nil, and write to the buffers
// returned.
func testApp(n *dataplanetest.Node, newErr error) (*app, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &app{
		stdout: &stdout, stderr: &stderr, now: time.Now, nodeIPsWait: defaultNodeIPsWait,
		newKernel: func(cfg *dataplane.Config) (kernel, error) {
			if newErr != nil {
				return nil, newErr
			}
			return n.Open(cfg)
		},
		nodeAddrs: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("192.168.0.1")}, nil
		},
		kubeClient: kubeClient,
		eventSink:  func(*options) (events.Sink, error) { return &fakeEventSink{}, nil },
		setConntrack: func(*kubeproxy.KubeProxyConntrackConfiguration) ([]string, error, error) {
			return nil, nil, nil
		},
		kernelRelease: func() (string, error) { return "6.1.0-test", nil },
	}, &stdout, &stderr
}

func manifestDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Each command's exit status and output, and what it leaves on the node.
func TestCommands(t *testing.T) {
	good := map[string]string{"web.yaml": webManifest}
	bad := map[string]string{"web.yaml": webManifest, "broken.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {portz: []}\n"}
	noIPVS := fmt.Errorf("dataplane: %w", ipvs.ErrNotSupported)
	tests := []struct {
		name string
		// given, if not nil, brings the node to where the command starts.
		given    func(t *testing.T, n *dataplanetest.Node)
		args     func(t *testing.T) []string
		newErr   error
		wantCode int
		// wantNode checks what the command left on the node; nil wants
		// the node as it was.
		wantNode func(t *testing.T, n *dataplanetest.Node)
		wantErr  string
	}{
		{name: "apply", args: func(t *testing.T) []string {
			return []string{"apply", "--once", "--source=files", "--manifests", manifestDir(t, good)}
		}, wantNode: webServed},
		{name: "apply the demo's manifests", args: func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", "testdata/demo"}
		}, wantNode: demoServed, wantErr: `"servicePorts": 5`},
		{name: "apply with an invalid document", args: func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", manifestDir(t, bad)}
		}, wantCode: 1, wantNode: webServed, wantErr: "1 problems"},
		{name: "apply not once", args: func(t *testing.T) []string { return []string{"apply", "--once=false"} }, wantCode: 1, wantErr: "use ipvsplane run"},
		{name: "plan on a fresh node", args: func(t *testing.T) []string {
			return []string{"plan", "--source=files", "--manifests", manifestDir(t, good), "--log-format=json"}
		}, wantErr: "ipvs add TCP 10.96.0.80:80 rr (demo/web:http)\n"},
		{name: "plan on a node that holds the state", given: demoApplied, args: func(t *testing.T) []string {
			return []string{"plan", "--source=files", "--manifests", "testdata/demo", "--log-format=json"}
		}, wantNode: demoServed, wantErr: "no changes: the kernel holds the desired state\na first sync also deletes conntrack's stale entries, as kube-proxy's does: conntrack reconcile udp IPv4\n"},
		{name: "cleanup", given: webApplied, args: func(t *testing.T) []string {
			return []string{"cleanup", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, wantNode: nothingProgrammed},
		{name: "cleanup --handover", given: webApplied, args: func(t *testing.T) []string {
			return []string{"cleanup", "--handover", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, wantNode: handedOver},
		{name: "kube-proxy's --cleanup", given: webApplied, args: func(t *testing.T) []string {
			return []string{"--cleanup", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, wantNode: nothingProgrammed},
		{name: "kube-proxy's --init-only", args: func(t *testing.T) []string {
			return []string{"run", "--init-only", "--source=files", "--manifests", t.TempDir()}
		}, wantNode: initialised},
		{name: "--cleanup is run's", args: func(t *testing.T) []string {
			return []string{"apply", "--cleanup", "--source=files", "--manifests", t.TempDir()}
		}, wantCode: 1, wantErr: "--cleanup: ipvsplane apply does not read it; it is a flag of ipvsplane run"},
		{name: "no IPVS", args: func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", manifestDir(t, good)}
		}, newErr: noIPVS, wantCode: 1, wantErr: "the kernel has no IPVS: load the ip_vs module"},
		{name: "run without IPVS", args: func(t *testing.T) []string {
			return []string{"--source=files", "--manifests", t.TempDir(), "--healthz-bind-address=", "--metrics-bind-address="}
		}, newErr: noIPVS, wantCode: 1, wantErr: "ip_vs"},
		{name: "run with a missing directory", args: func(t *testing.T) []string {
			return []string{"run", "--source=files", "--manifests", "/nonexistent", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}
		}, wantCode: 1, wantNode: noVirtualServers, wantErr: "source files"},
		{name: "run without a cluster", args: func(t *testing.T) []string {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			return []string{"run", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}
		}, wantCode: 1, wantErr: "no --kubeconfig or --master, and not running in a pod"},
		{name: "bad log level", args: func(t *testing.T) []string { return []string{"plan", "--log-level=loud"} }, wantCode: 1, wantErr: "--log-level"},
		{name: "unknown flag", args: func(t *testing.T) []string { return []string{"run", "--ipvs-schedular=rr"} }, wantCode: 1, wantErr: "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			if tt.given != nil {
				tt.given(t, n)
			}
			want := nodeState(t, n)
			a, stdout, stderr := testApp(n, tt.newErr)
			code := execute(a, tt.args(t))
			out := stdout.String() + stderr.String()
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; output:\n%s", code, tt.wantCode, out)
			}
			if !strings.Contains(out, tt.wantErr) {
				t.Errorf("output lacks %q:\n%s", tt.wantErr, out)
			}
			if tt.wantNode != nil {
				tt.wantNode(t, n)
			} else if got := nodeState(t, n); got != want {
				t.Errorf("the node was changed; it holds:\n%s", got)
			}
		})
	}
}

// webApplied and demoApplied are givens of TestCommands: the web
// Service's manifest, or the demo's, applied to the node.
func webApplied(t *testing.T, n *dataplanetest.Node) {
	apply(t, n, manifestDir(t, map[string]string{"web.yaml": webManifest}))
}

func demoApplied(t *testing.T, n *dataplanetest.Node) { apply(t, n, "testdata/demo") }

func apply(t *testing.T, n *dataplanetest.Node, dir string) {
	t.Helper()
	a, stdout, stderr := testApp(n, nil)
	if code := execute(a, []string{"apply", "--source=files", "--manifests", dir}); code != 0 {
		t.Fatalf("apply %s: exit %d:\n%s%s", dir, code, stdout, stderr)
	}
}

// demoServed fails the test unless the node serves the demo's DNS
// Service over UDP.
func demoServed(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	serves(t, n, "UDP 10.96.0.53:53", "10.244.2.53:53")
}

// handedOver fails the test unless the node is left for kube-proxy to
// adopt: ipvsplane's rules tables and ownership sets gone, the virtual
// servers, kube-ipvs0's addresses and the KUBE-* sets kept.
func handedOver(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	webServed(t, n)
	sets := n.Sets.Names()
	if !strings.Contains(n.Links.Dump(), "inet 10.96.0.80/32") || len(n.Rules.Tables()) > 0 ||
		!slices.Contains(sets, "KUBE-CLUSTER-IP") || slices.Contains(sets, "KUBE-IPVSPLANE-OWNED") || slices.Contains(sets, "KUBE-6-IPVSPLANE-OWNED") {
		t.Errorf("not handed over:\n%s", nodeState(t, n))
	}
}

// noVirtualServers fails the test if the node has a virtual server. The
// daemon's first prefill, of nothing listed, may run before the source
// fails, and make the node's settings, sets and rules.
func noVirtualServers(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	if len(n.IPVS.Table()) > 0 {
		t.Errorf("the node has virtual servers:\n%s", n.IPVS.Dump())
	}
}

// initialised fails the test unless the node has --init-only's settings,
// and nothing programmed.
func initialised(t *testing.T, n *dataplanetest.Node) {
	t.Helper()
	for _, name := range []string{"net/ipv4/ip_forward", "net/ipv4/vs/conntrack"} {
		if v := sysctl(t, n, name); v != "1" {
			t.Errorf("%s = %s, want 1", name, v)
		}
	}
	nothingProgrammed(t, n)
}

// A scheduler the kernel lacks stops run and apply before they program
// anything, naming the missing module, as kube-proxy refuses to start.
func TestMissingSchedulerRefusesStart(t *testing.T) {
	dir := manifestDir(t, map[string]string{"web.yaml": webManifest})
	for _, args := range [][]string{
		{"run", "--source=files", "--manifests", dir, "--ipvs-scheduler=sh", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="},
		{"apply", "--source=files", "--manifests", dir, "--ipvs-scheduler=sh"},
	} {
		n := newNode(t)
		a, stdout, stderr := testApp(n, nil)
		withoutScheduler(a, n, "sh")
		code := execute(a, args)
		out := stdout.String() + stderr.String()
		if code != 1 || !strings.Contains(out, "ip_vs_sh") {
			t.Errorf("%s: exit %d, output:\n%s", args[0], code, out)
		}
		untouched(t, n, args)
	}
}
