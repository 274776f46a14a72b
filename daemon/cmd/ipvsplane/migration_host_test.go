//go:build hosttest && !vmtest

package main

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// kustomize builds dir with kubectl's kustomize, as kubectl apply -k does,
// and returns its objects by kind.
func kustomize(t *testing.T, dir string) map[string]any {
	t.Helper()
	kubectl, err := controlplane.KubeProgram("kubectl")
	testutil.Require(t, err == nil, "kubectl "+controlplane.KubeVersion+" (run hack/build-kube kubectl)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return chartObjects(t, out)
}

// The migration's kustomizations build the objects of deploy/ (through an
// overlay of the operator's own, as the guide writes it) and of
// deploy/kubeadm/ (deploy/migration/kubeadm/) unchanged but for the
// Component's node affinity on ipvsplane's DaemonSet.
func TestMigrationKustomizations(t *testing.T) {
	affinity := ipvsplaneMigrationAffinity(t)
	withAffinity := func(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
		ds = ds.DeepCopy()
		ds.Spec.Template.Spec.Affinity = affinity
		return ds
	}

	kubeadm := kustomize(t, repoRoot+"/deploy/migration/kubeadm")
	if len(kubeadm) != 1 || !equality.Semantic.DeepEqual(kubeadm["DaemonSet"], withAffinity(readDaemonSet(t, kubeadmDaemonSet))) {
		t.Errorf("deploy/migration/kubeadm builds %v, not deploy/kubeadm's DaemonSet with the migration's affinity", slices.Sorted(maps.Keys(kubeadm)))
	}

	// The operator's overlay, outside deploy/ as kustomize requires.
	dir := t.TempDir()
	abs, err := filepath.Abs(repoRoot + "/deploy")
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources: [" + base + "]\ncomponents: [" + filepath.Join(base, "migration/ipvsplane-affinity") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	got, want := kustomize(t, dir), deployObjects(t)
	want["DaemonSet"] = withAffinity(want["DaemonSet"].(*appsv1.DaemonSet))
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("the overlay built %v, deploy/ holds %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for kind := range want {
		if !equality.Semantic.DeepEqual(got[kind], want[kind]) {
			t.Errorf("%s: the overlay built %+v, want deploy/'s with the migration's affinity", kind, got[kind])
		}
	}
}
