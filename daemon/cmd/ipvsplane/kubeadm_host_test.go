//go:build hosttest

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The KubeProxyConfiguration kubeadm generates (hack/build-kube builds
// kubeadm from the same k8s.io/kubernetes module as kube-proxy), mounted
// as kubeadm mounts it: config.conf beside kubeconfig.conf. It loads
// strictly, passes kube-proxy's validation, and its
// clientConnection.kubeconfig reaches the API server's client unchanged.
func TestKubeadmGeneratedConfig(t *testing.T) {
	kubeadm, err := controlplane.KubeProgram("kubeadm")
	testutil.Require(t, err == nil, "kubeadm "+controlplane.KubeVersion+" (run hack/build-kube kubeadm)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubeadm, "config", "print", "init-defaults", "--component-configs", "KubeProxyConfiguration").Output()
	if err != nil {
		t.Fatalf("kubeadm: %v", err)
	}
	var doc string
	for d := range strings.SplitSeq(string(out), "\n---\n") {
		if strings.Contains(d, "\nkind: KubeProxyConfiguration\n") {
			doc = d
		}
	}
	if doc == "" {
		t.Fatalf("no KubeProxyConfiguration in kubeadm's output:\n%s", out)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.conf")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	// The kubeconfig beside it, as kubeadm's DaemonSet mounts both; the
	// file names it by its path in the pod, which is kept as written.
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig.conf"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, notes, err := loadConfig(path)
	if err != nil || notes.lenient != nil {
		t.Fatalf("kubeadm's configuration: %v, lenient read: %v\n%s", err, notes.lenient, doc)
	}
	if err := validateKubeProxy(&cfg.KubeProxyConfiguration); err != nil {
		t.Errorf("kubeadm's configuration: %v", err)
	}
	const kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
	if cfg.ClientConnection.Kubeconfig != kubeconfig {
		t.Errorf("clientConnection.kubeconfig %q, want %q", cfg.ClientConnection.Kubeconfig, kubeconfig)
	}

	// The daemon with it and kubeadm's DaemonSet's flags: the kubeconfig
	// path reaches the client; its failure stops the start.
	a, stdout, stderr := testApp(&fakeKernel{}, nil)
	var got string
	a.kubeClient = func(o *options) (*watcher.Client, error) {
		got = o.kp.ClientConnection.Kubeconfig
		return nil, os.ErrNotExist
	}
	code := execute(a, []string{"--config=" + path, "--hostname-override=node-a", "--healthz-bind-address=", "--metrics-bind-address=", "--state-file="})
	if code != 1 || got != kubeconfig {
		t.Errorf("exit %d, the client got kubeconfig %q, want %q:\n%s%s", code, got, kubeconfig, stdout, stderr)
	}
}
