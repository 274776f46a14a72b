//go:build !vmtest

// The VM has only the package's testdata/, not deploy/.

package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	migrationDir       = repoRoot + "/deploy/migration"
	kubeProxyPatchFile = migrationDir + "/kube-proxy-affinity.yaml"
	ipvsplaneComponent = migrationDir + "/ipvsplane-affinity/kustomization.yaml"
	handoverFile       = migrationDir + "/handover.yaml"
)

// kubeProxyWithPatch is a DaemonSet shaped like kubeadm's kube-proxy with
// deploy/migration's strategic merge patch applied, as kubectl patch
// --patch-file applies it.
func kubeProxyWithPatch(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	kubeProxy := appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		HostNetwork:  true,
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Containers:   []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.37.2"}},
	}}}}
	original, err := json.Marshal(kubeProxy)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(kubeProxyPatchFile)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", kubeProxyPatchFile, err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("%s on kube-proxy's DaemonSet: %v", kubeProxyPatchFile, err)
	}
	var out appsv1.DaemonSet
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(out.Spec.Template.Spec.Containers, kubeProxy.Spec.Template.Spec.Containers) ||
		out.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("%s changed more than kube-proxy's affinity: %+v", kubeProxyPatchFile, out.Spec.Template.Spec)
	}
	return &out
}

// ipvsplaneMigrationAffinity is the affinity the kustomize Component adds
// to ipvsplane's DaemonSet.
func ipvsplaneMigrationAffinity(t *testing.T) *corev1.Affinity {
	t.Helper()
	var component struct {
		Kind    string
		Patches []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	readYAML(t, ipvsplaneComponent, &component)
	if component.Kind != "Component" || len(component.Patches) != 1 {
		t.Fatalf("%s: kind %q, %d patches: want one Component patch", ipvsplaneComponent, component.Kind, len(component.Patches))
	}
	p := component.Patches[0]
	var ops []struct {
		Op, Path string
		Value    corev1.Affinity
	}
	if err := yaml.UnmarshalStrict([]byte(p.Patch), &ops); err != nil {
		t.Fatalf("%s: %v", ipvsplaneComponent, err)
	}
	if p.Target.Kind != "DaemonSet" || p.Target.Name != "ipvsplane" || len(ops) != 1 ||
		ops[0].Op != "add" || ops[0].Path != "/spec/template/spec/affinity" {
		t.Fatalf("%s patches %s/%s with %+v: want one add of the pod's affinity on DaemonSet ipvsplane", ipvsplaneComponent, p.Target.Kind, p.Target.Name, ops)
	}
	return &ops[0].Value
}

// schedules reports whether a pod with affinity a may run on a node with
// labels, for the In and NotIn requirements the migration uses.
func schedules(t *testing.T, a *corev1.Affinity, labels map[string]string) bool {
	t.Helper()
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("no required node affinity: %+v", a)
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, r := range term.MatchExpressions {
			v, has := labels[r.Key]
			in := has && slices.Contains(r.Values, v)
			switch r.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && in
			case corev1.NodeSelectorOpNotIn:
				ok = ok && !in
			default:
				t.Fatalf("operator %s", r.Operator)
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// deploy/migration's two halves of the node affinity: kube-proxy's patch
// (a strategic merge patch on kubeadm's DaemonSet, changing nothing
// else) and ipvsplane's Component put every node under exactly one proxy,
// and the label ipvsplane.io/proxy=ipvsplane moves it to ipvsplane. The
// takeover test (e2e/cluster, make test-takeover) applies the same files.
func TestMigrationAffinities(t *testing.T) {
	kubeProxy := kubeProxyWithPatch(t).Spec.Template.Spec.Affinity
	ipvsplane := ipvsplaneMigrationAffinity(t)
	for _, labels := range []map[string]string{
		nil,
		{"ipvsplane.io/proxy": "ipvsplane"},
		{"ipvsplane.io/proxy": "stopped"},
		{"kubernetes.io/os": "linux", "ipvsplane.io/proxy": "ipvsplane"},
	} {
		toIPVSplane := labels["ipvsplane.io/proxy"] == "ipvsplane"
		if k, i := schedules(t, kubeProxy, labels), schedules(t, ipvsplane, labels); k == i || i != toIPVSplane {
			t.Errorf("a node labelled %v runs kube-proxy: %v, ipvsplane: %v", labels, k, i)
		}
	}
	if a := readDaemonSet(t, deployDaemonSet).Spec.Template.Spec.Affinity; a != nil {
		t.Errorf("deploy/daemonset.yaml has an affinity the migration's would replace: %+v", a)
	}
}

// deploy/migration/handover.yaml, its NODE filled in: a pod on that node,
// in its network namespace, with the DaemonSet's image and privileges,
// running `ipvsplane cleanup --handover` once.
func TestMigrationHandoverPod(t *testing.T) {
	data, err := os.ReadFile(handoverFile)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(strings.ReplaceAll(string(data), "NODE", "node-a")), nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", handoverFile, err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("%s holds a %T, not a Pod", handoverFile, obj)
	}
	spec := pod.Spec
	if pod.Name != "ipvsplane-handover-node-a" || spec.NodeName != "node-a" || !spec.HostNetwork || spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod %s: node %q, hostNetwork %v, restartPolicy %s", pod.Name, spec.NodeName, spec.HostNetwork, spec.RestartPolicy)
	}
	ds := readDaemonSet(t, deployDaemonSet).Spec.Template.Spec
	c, dc := spec.Containers[0], ds.Containers[0]
	if len(spec.Containers) != 1 || c.Image != dc.Image || *c.SecurityContext.Privileged != *dc.SecurityContext.Privileged ||
		!slices.Equal(c.SecurityContext.Capabilities.Add, dc.SecurityContext.Capabilities.Add) {
		t.Errorf("container %s %+v, the DaemonSet's %s %+v", c.Image, c.SecurityContext, dc.Image, dc.SecurityContext)
	}
	if !equality.Semantic.DeepEqual(spec.Tolerations, ds.Tolerations) {
		t.Errorf("tolerations %+v, the DaemonSet's %+v", spec.Tolerations, ds.Tolerations)
	}
	cmd, rest, err := newApp().rootCommand().Find(c.Args)
	if err != nil || cmd.Name() != "cleanup" {
		t.Fatalf("args %v: %v", c.Args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil || cmd.Flags().Lookup("handover").Value.String() != "true" {
		t.Errorf("args %v: %v", c.Args, err)
	}
}
