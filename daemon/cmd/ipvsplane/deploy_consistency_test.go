//go:build !vmtest

// The VM has only the package's testdata/, not deploy/ or the chart.

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot         = "../../.."
	deployDaemonSet  = repoRoot + "/deploy/daemonset.yaml"
	kubeadmDaemonSet = repoRoot + "/deploy/kubeadm/daemonset.yaml"
	chartDaemonSet   = repoRoot + "/charts/ipvsplane/templates/daemonset.yaml"
	imageRepository  = "ghcr.io/ipvsplane/ipvsplane"
)

// readDaemonSet decodes the DaemonSet in the file at path.
func readDaemonSet(t *testing.T, path string) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		t.Fatalf("%s holds a %T, not a DaemonSet", path, obj)
	}
	return ds
}

// dnsPolicyLine is the chart template's dnsPolicy, read as text: helm
// renders it (chart_host_test.go) only where helm is installed.
var dnsPolicyLine = regexp.MustCompile(`(?m)^\s*dnsPolicy:\s*(\S+)\s*$`)

// The proxy resolves names through the node, as kubeadm's kube-proxy
// DaemonSet does (it sets no dnsPolicy: ClusterFirst, which in the host's
// network namespace is the node's resolv.conf). ClusterFirstWithHostNet
// asks the cluster DNS Service, whose address the proxy itself programs:
// a new node given the API server as a DNS name could never start.
func TestDeployDNSPolicy(t *testing.T) {
	resolvesThroughNode := func(p corev1.DNSPolicy) bool {
		return p == "" || p == corev1.DNSClusterFirst || p == corev1.DNSDefault
	}
	for _, path := range []string{deployDaemonSet, kubeadmDaemonSet} {
		pod := readDaemonSet(t, path).Spec.Template.Spec
		if !pod.HostNetwork || !resolvesThroughNode(pod.DNSPolicy) {
			t.Errorf("%s: hostNetwork %v, dnsPolicy %q: the proxy must resolve through the node, never %s",
				path, pod.HostNetwork, pod.DNSPolicy, corev1.DNSClusterFirstWithHostNet)
		}
	}
	tmpl, err := os.ReadFile(chartDaemonSet)
	if err != nil {
		t.Fatal(err)
	}
	m := dnsPolicyLine.FindAllSubmatch(tmpl, -1)
	if len(m) != 1 || !resolvesThroughNode(corev1.DNSPolicy(m[0][1])) {
		t.Errorf("%s: dnsPolicy lines %q: want one, resolving through the node", chartDaemonSet, m)
	}
}

// deploy/kubeadm's DaemonSet differs from deploy/'s only in what it reads
// (kubeadm's ConfigMap and service account): the probes, DNS, image,
// privileges, scheduling and update strategy are the same, so a fix to
// one (the probes' timeouts under load) reaches both.
func TestDeployKubeadmDaemonSetMatchesDeploy(t *testing.T) {
	ours, kubeadm := readDaemonSet(t, deployDaemonSet), readDaemonSet(t, kubeadmDaemonSet)
	same := func(what string, a, b any) {
		t.Helper()
		if !equality.Semantic.DeepEqual(a, b) {
			ya, _ := yaml.Marshal(a)
			yb, _ := yaml.Marshal(b)
			t.Errorf("%s differs:\ndeploy/kubeadm:\n%s\ndeploy/:\n%s", what, yb, ya)
		}
	}
	p, k := ours.Spec.Template.Spec, kubeadm.Spec.Template.Spec
	c, kc := p.Containers[0], k.Containers[0]
	same("livenessProbe", c.LivenessProbe, kc.LivenessProbe)
	same("readinessProbe", c.ReadinessProbe, kc.ReadinessProbe)
	same("image", c.Image, kc.Image)
	same("securityContext", c.SecurityContext, kc.SecurityContext)
	same("ports", c.Ports, kc.Ports)
	same("resources", c.Resources, kc.Resources)
	same("dnsPolicy", p.DNSPolicy, k.DNSPolicy)
	same("hostNetwork", p.HostNetwork, k.HostNetwork)
	same("tolerations", p.Tolerations, k.Tolerations)
	same("nodeSelector", p.NodeSelector, k.NodeSelector)
	same("priorityClassName", p.PriorityClassName, k.PriorityClassName)
	same("updateStrategy", ours.Spec.UpdateStrategy, kubeadm.Spec.UpdateStrategy)
}

// versionFile is the version the file VERSION holds.
func versionFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(repoRoot + "/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("VERSION holds %q, not vX.Y.Z[-PRE]", v)
	}
	return v
}

// One version, the file VERSION's, names the image everywhere: the
// manifests of deploy/ and deploy/kubeadm/, the chart (appVersion, its
// version without the v, the image tag its values leave to appVersion),
// the library the daemon's go.mod requires (and go.work's replace of it),
// and what the Makefile builds: the binary's version and the image's tag.
// Were they to differ, the kubelet would look for an image `make image`
// did not make.
func TestVersionEverywhere(t *testing.T) {
	v := versionFile(t)
	for _, path := range []string{deployDaemonSet, kubeadmDaemonSet} {
		if got := readDaemonSet(t, path).Spec.Template.Spec.Containers[0].Image; got != imageRepository+":"+v {
			t.Errorf("%s names image %s, VERSION says %s:%s", path, got, imageRepository, v)
		}
	}
	var chart struct{ Version, AppVersion string }
	readYAML(t, repoRoot+"/charts/ipvsplane/Chart.yaml", &chart)
	if chart.AppVersion != v || chart.Version != strings.TrimPrefix(v, "v") {
		t.Errorf("Chart.yaml: version %q, appVersion %q; VERSION says %s", chart.Version, chart.AppVersion, v)
	}
	var values struct {
		Image struct{ Repository, Tag string }
	}
	readYAML(t, repoRoot+"/charts/ipvsplane/values.yaml", &values)
	if values.Image.Repository != imageRepository || (values.Image.Tag != "" && values.Image.Tag != v) {
		t.Errorf("values.yaml: image %s:%s; VERSION says %s:%s", values.Image.Repository, values.Image.Tag, imageRepository, v)
	}

	checkModulesPair(t, v)

	// What make would run, not run: the version linked in and the tag.
	makeProgram := testutil.RequireProgram(t, "make")
	cmd := exec.Command(makeProgram, "-n", "-C", repoRoot, "bin/ipvsplane", "image")
	// A make above this test passes its command line's variables down
	// through MAKEFLAGS; the Makefile alone is checked.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n bin/ipvsplane image: %v\n%s", err, out)
	}
	for _, want := range []string{"-X main.version=" + v + " ", "-ref " + imageRepository + ":" + v + " "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make -n bin/ipvsplane image runs no %q:\n%s", want, out)
		}
	}
}

// moduleVersion is a module path and version as go mod edit -json and
// go work edit -json print them.
type moduleVersion struct{ Path, Version string }

// checkModulesPair checks the two modules are released as a pair at
// version v: the daemon's go.mod requires the library at v and has no
// replace or exclude (go install refuses a module with either), and
// go.work builds that version from the library beside the daemon.
func checkModulesPair(t *testing.T, v string) {
	t.Helper()
	const library = "github.com/ipvsplane/ipvsplane"
	var mod struct {
		Require []moduleVersion
		Replace []struct{ Old, New moduleVersion }
		Exclude []moduleVersion
	}
	goEditJSON(t, &mod, "mod", "edit", "-json", repoRoot+"/daemon/go.mod")
	required := "no version"
	if i := slices.IndexFunc(mod.Require, func(m moduleVersion) bool { return m.Path == library }); i >= 0 {
		required = mod.Require[i].Version
	}
	if required != v {
		t.Errorf("daemon/go.mod requires %s at %s; VERSION says %s", library, required, v)
	}
	if len(mod.Replace) > 0 || len(mod.Exclude) > 0 {
		t.Errorf("daemon/go.mod replaces %v, excludes %v: go install refuses it", mod.Replace, mod.Exclude)
	}
	var work struct {
		Replace []struct{ Old, New moduleVersion }
	}
	goEditJSON(t, &work, "work", "edit", "-json", repoRoot+"/go.work")
	if len(work.Replace) != 1 || work.Replace[0].Old != (moduleVersion{library, v}) || work.Replace[0].New != (moduleVersion{Path: "./"}) {
		t.Errorf("go.work replaces %v; want %s %s => ./ alone", work.Replace, library, v)
	}
}

// goEditJSON decodes into v what the go command prints with args.
func goEditJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := exec.Command(testutil.RequireProgram(t, "go"), args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
}

// readYAML decodes the YAML file at path into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
