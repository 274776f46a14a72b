//go:build hosttest && !vmtest

package main

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
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
	cfg, notes, err := config.Load(path)
	if err != nil || notes.Lenient != nil {
		t.Fatalf("kubeadm's configuration: %v, lenient read: %v\n%s", err, notes.Lenient, doc)
	}
	if err := config.Validate(&cfg.KubeProxyConfiguration); err != nil {
		t.Errorf("kubeadm's configuration: %v", err)
	}
	const kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
	if cfg.ClientConnection.Kubeconfig != kubeconfig {
		t.Errorf("clientConnection.kubeconfig %q, want %q", cfg.ClientConnection.Kubeconfig, kubeconfig)
	}

	// The daemon with it and kubeadm's DaemonSet's flags: the kubeconfig
	// path reaches the client; its failure stops the start.
	a, stdout, stderr := testApp(newNode(t), nil)
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

// The kube-proxy addon kubeadm installs (its ConfigMap, service account
// and DaemonSet, printed by kubeadm itself) and deploy/kubeadm's
// DaemonSet: ipvsplane's mounts kubeadm's ConfigMap where kubeadm's
// DaemonSet does, with its service account and its --config, and loads
// both files of it unchanged; the kubeconfig names the API server kubeadm
// was given.
func TestKubeadmConfigMap(t *testing.T) {
	kubeadm, err := controlplane.KubeProgram("kubeadm")
	testutil.Require(t, err == nil, "kubeadm "+controlplane.KubeVersion+" (run hack/build-kube kubeadm)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The version and address given, so kubeadm looks up neither.
	out, err := exec.CommandContext(ctx, kubeadm, "init", "phase", "addon", "kube-proxy", "--print-manifest",
		"--kubernetes-version", controlplane.KubeVersion, "--apiserver-advertise-address", "192.0.2.10", "--pod-network-cidr", "10.244.0.0/16").Output()
	if err != nil {
		t.Fatalf("kubeadm: %v", err)
	}
	objs := kubeadmObjects(t, out)
	cm, theirs := objs["ConfigMap"].(*corev1.ConfigMap), objs["DaemonSet"].(*appsv1.DaemonSet)
	data, err := os.ReadFile("../../../deploy/kubeadm/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("deploy/kubeadm/daemonset.yaml: %v", err)
	}
	ours := obj.(*appsv1.DaemonSet)
	mount, configPath := configMapMount(t, theirs, cm.Name)
	if m, c := configMapMount(t, ours, cm.Name); m != mount || c != configPath {
		t.Errorf("deploy/kubeadm mounts ConfigMap %s at %s with --config=%s; kubeadm's DaemonSet at %s with --config=%s", cm.Name, m, c, mount, configPath)
	}
	if ours.Spec.Template.Spec.ServiceAccountName != theirs.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("service account %q, kubeadm's %q", ours.Spec.Template.Spec.ServiceAccountName, theirs.Spec.Template.Spec.ServiceAccountName)
	}

	// The ConfigMap's files where the pod would see them.
	dir := t.TempDir()
	for name, content := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, notes, err := config.Load(filepath.Join(dir, filepath.Base(configPath)))
	if err != nil || notes.Lenient != nil {
		t.Fatalf("kubeadm's config.conf: %v, lenient read: %v", err, notes.Lenient)
	}
	if err := config.Validate(&cfg.KubeProxyConfiguration); err != nil {
		t.Errorf("kubeadm's config.conf: %v", err)
	}
	if want := path.Join(mount, "kubeconfig.conf"); cfg.ClientConnection.Kubeconfig != want {
		t.Errorf("clientConnection.kubeconfig %q, want %q", cfg.ClientConnection.Kubeconfig, want)
	}
	kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig.conf"]))
	if err != nil {
		t.Fatalf("kubeadm's kubeconfig.conf: %v", err)
	}
	// The files it names are the pod's service account's, not here.
	current := kc.Contexts[kc.CurrentContext]
	if current == nil || kc.Clusters[current.Cluster] == nil || kc.AuthInfos[current.AuthInfo] == nil {
		t.Fatalf("kubeadm's kubeconfig.conf has no current context:\n%s", cm.Data["kubeconfig.conf"])
	}
	if server, token := kc.Clusters[current.Cluster].Server, kc.AuthInfos[current.AuthInfo].TokenFile; server != "https://192.0.2.10:6443" ||
		token != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("kubeadm's kubeconfig.conf: server %q, token file %q", server, token)
	}
}

// kubeadmObjects decodes kubeadm's printed manifests by kind; kubeadm
// prints one of each kind this test reads.
func kubeadmObjects(t *testing.T, manifests []byte) map[string]runtime.Object {
	t.Helper()
	objs := map[string]runtime.Object{}
	for doc := range strings.SplitSeq(string(manifests), "\n---\n") {
		if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
			continue
		}
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("kubeadm's manifest: %v\n%s", err, doc)
		}
		objs[gvk.Kind] = obj
	}
	for _, kind := range []string{"ConfigMap", "DaemonSet"} {
		if objs[kind] == nil {
			t.Fatalf("kubeadm printed no %s:\n%s", kind, manifests)
		}
	}
	return objs
}

// configMapMount returns where ds's container mounts the ConfigMap named
// configMap, and the path its --config flag gives.
func configMapMount(t *testing.T, ds *appsv1.DaemonSet, configMap string) (mount, config string) {
	t.Helper()
	volume := ""
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap {
			volume = v.Name
		}
	}
	c := ds.Spec.Template.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			mount = m.MountPath
		}
	}
	for _, arg := range slices.Concat(c.Command, c.Args) {
		if v, ok := strings.CutPrefix(arg, "--config="); ok {
			config = v
		}
	}
	if mount == "" || config == "" || path.Dir(config) != mount {
		t.Errorf("daemonset %s: ConfigMap %s mounted at %q, --config=%q", ds.Name, configMap, mount, config)
	}
	return mount, config
}

// docs/kubeadm.md's `proxy:` block, added to a ClusterConfiguration, is
// what kubeadm reads as the kube-proxy addon disabled, the setting its
// upgrade phase addon/kube-proxy skips on: kubeadm config images list
// leaves kube-proxy's image out with it and lists it without.
func TestKubeadmProxyDisabled(t *testing.T) {
	kubeadm, err := controlplane.KubeProgram("kubeadm")
	testutil.Require(t, err == nil, "kubeadm "+controlplane.KubeVersion+" (run hack/build-kube kubeadm)")
	doc, err := os.ReadFile("../../../docs/kubeadm.md")
	if err != nil {
		t.Fatal(err)
	}
	block, ok := "", false
	for part := range strings.SplitSeq(string(doc), "```yaml\n") {
		if strings.HasPrefix(part, "proxy:") {
			block, _, ok = strings.Cut(part, "```")
		}
	}
	if !ok {
		t.Fatal("docs/kubeadm.md has no yaml block starting with proxy:")
	}
	base := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: " + controlplane.KubeVersion + "\n"
	for _, c := range []struct {
		config    string
		kubeProxy bool
	}{{base, true}, {base + block, false}} {
		path := filepath.Join(t.TempDir(), "kubeadm.yaml")
		if err := os.WriteFile(path, []byte(c.config), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, kubeadm, "config", "images", "list", "--config", path).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kubeadm config images list: %v\n%s\n%s", err, out, c.config)
		}
		if got := strings.Contains(string(out), "/kube-proxy:"); got != c.kubeProxy {
			t.Errorf("kubeadm lists kube-proxy's image: %v, want %v, with\n%s\nkubeadm:\n%s", got, c.kubeProxy, c.config, out)
		}
	}
}
