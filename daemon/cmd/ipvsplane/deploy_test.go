//go:build !vmtest

// The VM has only the package's testdata/, not deploy/.

package main

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// manifest is a file of deploy/ and what it holds.
type manifest struct {
	path string
	data []byte
}

// deployManifests reads the files `kubectl apply -f deploy/` reads:
// every one must be an object (deploy/Kustomization has no extension).
func deployManifests(t *testing.T) []manifest {
	t.Helper()
	var files []string
	for _, ext := range []string{"yaml", "yml", "json"} {
		matches, err := filepath.Glob("../../../deploy/*." + ext)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/")
	}
	var out []manifest
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, manifest{f, data})
	}
	return out
}

// deploy/ holds valid objects, the DaemonSet's arguments parse as
// ipvsplane's flags, its ConfigMap holds a configuration ipvsplane uses
// whole, and the ClusterRole grants what the daemon calls and nothing
// more.
func TestDeployManifests(t *testing.T) {
	objs := map[string]runtime.Object{}
	for _, m := range deployManifests(t) {
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(m.data, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", m.path, err)
		}
		objs[gvk.Kind] = obj
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"} {
		if objs[kind] == nil {
			t.Errorf("deploy/ has no %s", kind)
		}
	}

	cm, _ := objs["ConfigMap"].(*corev1.ConfigMap)
	ds, _ := objs["DaemonSet"].(*appsv1.DaemonSet)
	if cm == nil || ds == nil {
		t.FailNow()
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.conf"), []byte(cm.Data["config.conf"]), 0o644); err != nil {
		t.Fatal(err)
	}
	_, notes, err := config.Load(filepath.Join(dir, "config.conf"))
	if err != nil || len(notes.Ignored) > 0 || notes.Lenient != nil {
		t.Errorf("the ConfigMap's configuration: %v, notes %+v", err, notes)
	}

	c := ds.Spec.Template.Spec.Containers[0]
	if !ds.Spec.Template.Spec.HostNetwork || !slices.Contains(c.SecurityContext.Capabilities.Add, "NET_ADMIN") {
		t.Error("the DaemonSet must run in the host's network namespace with NET_ADMIN")
	}
	if ds.Spec.Template.Spec.ServiceAccountName != objs["ServiceAccount"].(*corev1.ServiceAccount).Name {
		t.Error("the DaemonSet does not use the ServiceAccount")
	}
	args := slices.Clone(c.Args)
	for i, a := range args {
		a = strings.ReplaceAll(a, "$(NODE_NAME)", "node-a")
		args[i] = strings.Replace(a, "/etc/ipvsplane/config.conf", filepath.Join(dir, "config.conf"), 1)
	}
	root := newApp().rootCommand()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "run" {
		t.Fatalf("the DaemonSet's args %v: %v", c.Args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("the DaemonSet's args %v: %v", c.Args, err)
	}

	// Exactly what the daemon calls: lists and watches, and Events
	// created through events.k8s.io; a grant beyond it is one a stolen
	// token would have for nothing.
	type grant struct{ group, resource, verb string }
	want := []grant{
		{"", "nodes", "list"}, {"", "nodes", "watch"},
		{"", "services", "list"}, {"", "services", "watch"},
		{"discovery.k8s.io", "endpointslices", "list"}, {"discovery.k8s.io", "endpointslices", "watch"},
		{"events.k8s.io", "events", "create"},
	}
	var got []grant
	for _, r := range objs["ClusterRole"].(*rbacv1.ClusterRole).Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, grant{g, res, v})
				}
			}
		}
	}
	slices.SortFunc(got, func(a, b grant) int {
		return cmp.Or(strings.Compare(a.group, b.group), strings.Compare(a.resource, b.resource), strings.Compare(a.verb, b.verb))
	})
	if !slices.Equal(got, want) {
		t.Errorf("the ClusterRole grants %v, want %v", got, want)
	}
}
