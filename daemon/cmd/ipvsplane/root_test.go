package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/ipvs"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

func testApp(k *fakeKernel, newErr error) (*app, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &app{
		stdout: &stdout, stderr: &stderr, now: time.Now, nodeIPsWait: defaultNodeIPsWait,
		newKernel: func(*dataplane.Config) (kernel, error) {
			if newErr != nil {
				return nil, newErr
			}
			return k, nil
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

func TestCommands(t *testing.T) {
	good := map[string]string{"web.yaml": webManifest}
	bad := map[string]string{"web.yaml": webManifest, "broken.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {portz: []}\n"}
	noIPVS := fmt.Errorf("dataplane: %w", ipvs.ErrNotSupported)
	tests := []struct {
		name      string
		args      func(t *testing.T) []string
		newErr    error
		wantCode  int
		wantCalls []string
		wantErr   string
	}{
		{"apply", func(t *testing.T) []string {
			return []string{"apply", "--once", "--source=files", "--manifests", manifestDir(t, good)}
		}, nil, 0, []string{"sync"}, ""},
		{"apply the demo's manifests", func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", "testdata/demo"}
		}, nil, 0, []string{"sync"}, `"servicePorts": 5`},
		{"apply with an invalid document", func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", manifestDir(t, bad)}
		}, nil, 1, []string{"sync"}, "1 problems"},
		{"apply not once", func(t *testing.T) []string { return []string{"apply", "--once=false"} }, nil, 1, nil, "use ipvsplane run"},
		{"plan", func(t *testing.T) []string {
			return []string{"plan", "--source=files", "--manifests", manifestDir(t, good), "--log-format=json"}
		}, nil, 0, []string{"dry-run"}, "no changes: the kernel holds the desired state\na first sync also deletes conntrack's stale entries, as kube-proxy's does: conntrack reconcile udp IPv4\n"},
		{"cleanup", func(t *testing.T) []string {
			return []string{"cleanup", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, nil, 0, []string{"cleanup"}, ""},
		{"cleanup --handover", func(t *testing.T) []string {
			return []string{"cleanup", "--handover", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, nil, 0, []string{"handover"}, ""},
		{"kube-proxy's --cleanup", func(t *testing.T) []string {
			return []string{"--cleanup", "--state-file", filepath.Join(t.TempDir(), "none.json")}
		}, nil, 0, []string{"cleanup"}, ""},
		{"kube-proxy's --init-only", func(t *testing.T) []string {
			return []string{"run", "--init-only", "--source=files", "--manifests", t.TempDir()}
		}, nil, 0, []string{"init"}, ""},
		{"--cleanup is run's", func(t *testing.T) []string {
			return []string{"apply", "--cleanup", "--source=files", "--manifests", t.TempDir()}
		}, nil, 1, nil, "--cleanup: ipvsplane apply does not read it; it is a flag of ipvsplane run"},
		{"no IPVS", func(t *testing.T) []string {
			return []string{"apply", "--source=files", "--manifests", manifestDir(t, good)}
		}, noIPVS, 1, nil, "the kernel has no IPVS: load the ip_vs module"},
		{"run without IPVS", func(t *testing.T) []string {
			return []string{"--source=files", "--manifests", t.TempDir(), "--healthz-bind-address=", "--metrics-bind-address="}
		}, noIPVS, 1, nil, "ip_vs"},
		{"run with a missing directory", func(t *testing.T) []string {
			return []string{"run", "--source=files", "--manifests", "/nonexistent", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}
		}, nil, 1, nil, "source files"},
		{"run without a cluster", func(t *testing.T) []string {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			return []string{"run", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="}
		}, nil, 1, nil, "no --kubeconfig or --master, and not running in a pod"},
		{"bad log level", func(t *testing.T) []string { return []string{"plan", "--log-level=loud"} }, nil, 1, nil, "--log-level"},
		{"unknown flag", func(t *testing.T) []string { return []string{"run", "--ipvs-schedular=rr"} }, nil, 1, nil, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &fakeKernel{}
			a, stdout, stderr := testApp(k, tt.newErr)
			code := execute(a, tt.args(t))
			out := stdout.String() + stderr.String()
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; output:\n%s", code, tt.wantCode, out)
			}
			if diff := cmp.Diff(tt.wantCalls, k.calls); diff != "" {
				t.Errorf("kernel calls (-want +got):\n%s", diff)
			}
			if !strings.Contains(out, tt.wantErr) {
				t.Errorf("output lacks %q:\n%s", tt.wantErr, out)
			}
		})
	}
}

// A scheduler the kernel lacks stops run and apply before they program
// anything, naming the missing module, as kube-proxy refuses to start.
func TestMissingSchedulerRefusesStart(t *testing.T) {
	dir := manifestDir(t, map[string]string{"web.yaml": webManifest})
	for _, args := range [][]string{
		{"run", "--source=files", "--manifests", dir, "--ipvs-scheduler=sh", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="},
		{"apply", "--source=files", "--manifests", dir, "--ipvs-scheduler=sh"},
	} {
		k := &fakeKernel{noScheduler: true}
		a, stdout, stderr := testApp(k, nil)
		code := execute(a, args)
		out := stdout.String() + stderr.String()
		if code != 1 || len(k.calls) != 0 || !strings.Contains(out, "ip_vs_sh") {
			t.Errorf("%s: exit %d, kernel calls %v, output:\n%s", args[0], code, k.calls, out)
		}
	}
}
