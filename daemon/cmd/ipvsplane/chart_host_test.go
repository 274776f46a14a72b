//go:build hosttest && !vmtest

package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/config"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// helmCmd runs the helm hack/build-tools builds, with its own empty
// configuration, cache and data directories.
type helmCmd struct {
	t    *testing.T
	path string
	env  []string
}

func newHelm(t *testing.T) *helmCmd {
	helm, err := controlplane.ToolProgram("helm")
	testutil.Require(t, err == nil, "helm (run hack/build-tools helm)")
	dir := t.TempDir()
	env := append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
	return &helmCmd{t: t, path: helm, env: env}
}

func (h *helmCmd) run(args ...string) []byte {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.path, args...)
	cmd.Env = h.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		h.t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// chartObjects decodes rendered manifests by kind; kinds client-go does
// not know (the PodMonitor) as maps.
func chartObjects(t *testing.T, manifests []byte) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for _, doc := range strings.Split(string(manifests), "\n---") {
		var head struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		if head.Kind == "" {
			continue
		}
		if head.Kind == "ConfigMap" && strings.HasSuffix(head.Metadata.Name, "-dashboard") {
			head.Kind = "DashboardConfigMap"
		}
		if _, dup := objs[head.Kind]; dup {
			t.Fatalf("two %s objects", head.Kind)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			var m map[string]any
			err = yaml.Unmarshal([]byte(doc), &m)
			obj = nil
			objs[head.Kind] = m
		} else {
			objs[head.Kind] = obj
		}
		if err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
	}
	return objs
}

// deployObjects reads deploy/'s objects by kind.
func deployObjects(t *testing.T) map[string]any {
	t.Helper()
	var all []byte
	for _, m := range deployManifests(t) {
		all = append(append(all, "\n---\n"...), m.data...)
	}
	return chartObjects(t, all)
}

// charts/ipvsplane passes helm lint, and with its default values renders
// what deploy/ holds: the same ServiceAccount, ClusterRole and binding,
// configuration and pod spec, under deploy/'s names and namespace for a
// release named ipvsplane in kube-system; only the chart's labels (its
// selector has the release's too) and the pods' configuration checksum
// are added.
func TestHelmChartDefaults(t *testing.T) {
	h := newHelm(t)
	h.run("lint", "--strict", chartDir)
	got := chartObjects(t, h.run("template", "ipvsplane", chartDir, "--namespace", "kube-system"))
	want := deployObjects(t)
	if len(got) != len(want) {
		t.Errorf("the chart renders %d kinds, deploy/ has %d", len(got), len(want))
	}
	for kind, w := range want {
		g, ok := got[kind]
		if !ok {
			t.Errorf("the chart renders no %s", kind)
			continue
		}
		gm, wm := g.(metaObject), w.(metaObject)
		if gm.GetName() != wm.GetName() || gm.GetNamespace() != wm.GetNamespace() {
			t.Errorf("%s: %s/%s, deploy/ has %s/%s", kind, gm.GetNamespace(), gm.GetName(), wm.GetNamespace(), wm.GetName())
		}
		for k, v := range wm.GetLabels() {
			if gm.GetLabels()[k] != v {
				t.Errorf("%s: label %s=%q, deploy/ has %q", kind, k, gm.GetLabels()[k], v)
			}
		}
	}
	sameAsDeploy(t, got, want)
}

// metaObject is what every rendered object has.
type metaObject interface {
	GetName() string
	GetNamespace() string
	GetLabels() map[string]string
}

// sameAsDeploy compares the parts of the objects that must match.
func sameAsDeploy(t *testing.T, got, want map[string]any) {
	t.Helper()
	if g, w := got["ClusterRole"].(*rbacv1.ClusterRole), want["ClusterRole"].(*rbacv1.ClusterRole); !equality.Semantic.DeepEqual(g.Rules, w.Rules) {
		t.Errorf("ClusterRole rules:\n%+v\ndeploy/:\n%+v", g.Rules, w.Rules)
	}
	gb, wb := got["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding), want["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding)
	if !equality.Semantic.DeepEqual(gb.RoleRef, wb.RoleRef) || !equality.Semantic.DeepEqual(gb.Subjects, wb.Subjects) {
		t.Errorf("ClusterRoleBinding: %+v %+v\ndeploy/: %+v %+v", gb.RoleRef, gb.Subjects, wb.RoleRef, wb.Subjects)
	}
	gc, wc := got["ConfigMap"].(*corev1.ConfigMap), want["ConfigMap"].(*corev1.ConfigMap)
	if !slices.Equal(slices.Sorted(maps.Keys(gc.Data)), slices.Sorted(maps.Keys(wc.Data))) {
		t.Errorf("ConfigMap keys %v, deploy/ has %v", slices.Sorted(maps.Keys(gc.Data)), slices.Sorted(maps.Keys(wc.Data)))
	}
	var gconf, wconf map[string]any
	if err := yaml.Unmarshal([]byte(gc.Data["config.conf"]), &gconf); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(wc.Data["config.conf"]), &wconf); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gconf, wconf) {
		t.Errorf("config.conf:\n%s\ndeploy/:\n%s", gc.Data["config.conf"], wc.Data["config.conf"])
	}
	gd, wd := got["DaemonSet"].(*appsv1.DaemonSet), want["DaemonSet"].(*appsv1.DaemonSet)
	if !equality.Semantic.DeepEqual(gd.Spec.UpdateStrategy, wd.Spec.UpdateStrategy) {
		t.Errorf("updateStrategy %+v, deploy/ has %+v", gd.Spec.UpdateStrategy, wd.Spec.UpdateStrategy)
	}
	if !equality.Semantic.DeepEqual(gd.Spec.Template.Spec, wd.Spec.Template.Spec) {
		g, _ := yaml.Marshal(gd.Spec.Template.Spec)
		w, _ := yaml.Marshal(wd.Spec.Template.Spec)
		t.Errorf("pod spec:\n%s\ndeploy/:\n%s", g, w)
	}
	for k := range gd.Spec.Template.Annotations {
		if k != "checksum/config" {
			t.Errorf("pod annotation %s", k)
		}
	}
}

// Non-default values reach the objects: image, API server address,
// configuration (merged over the defaults, and loaded by ipvsplane whole),
// ports and probes following the bind addresses, log format and extra
// arguments (parsed as ipvsplane's flags), tolerations, no priority class,
// the release's names and namespace, and a PodMonitor on the metrics port.
func TestHelmChartValues(t *testing.T) {
	h := newHelm(t)
	h.run("lint", "--strict", chartDir, "--values", "testdata/helm-values.yaml")
	objs := chartObjects(t, h.run("template", "edge", chartDir, "--namespace", "net", "--values", "testdata/helm-values.yaml"))
	ds := objs["DaemonSet"].(*appsv1.DaemonSet)
	cm := objs["ConfigMap"].(*corev1.ConfigMap)
	if ds.Name != "edge-ipvsplane" || ds.Namespace != "net" || cm.Name != "edge-ipvsplane" {
		t.Errorf("names %s/%s and %s", ds.Namespace, ds.Name, cm.Name)
	}
	if b := objs["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding); b.Subjects[0].Namespace != "net" || b.Subjects[0].Name != "edge-ipvsplane" || b.RoleRef.Name != "edge-ipvsplane" {
		t.Errorf("binding %+v %+v", b.Subjects, b.RoleRef)
	}
	if cm.Data["apiServerHost"] != "192.0.2.10" || cm.Data["apiServerPort"] != "6443" {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.conf")
	if err := os.WriteFile(conf, []byte(cm.Data["config.conf"]), 0o644); err != nil {
		t.Fatal(err)
	}
	kp, notes, err := config.Load(conf)
	if err != nil || len(notes.Ignored) > 0 || notes.Lenient != nil {
		t.Fatalf("the configuration: %v, notes %+v\n%s", err, notes, cm.Data["config.conf"])
	}
	if kp.IPVS.Scheduler != "wrr" || kp.ClusterCIDR != "10.0.0.0/8" || kp.IPVS.SyncPeriod.Duration != 30*time.Second {
		t.Errorf("configuration: scheduler %q, cluster CIDR %q, sync period %v", kp.IPVS.Scheduler, kp.ClusterCIDR, kp.IPVS.SyncPeriod)
	}

	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "registry.example/net/ipvsplane:v9.8.7" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	if pod.PriorityClassName != "" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" {
		t.Errorf("priority class %q, tolerations %+v", pod.PriorityClassName, pod.Tolerations)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["healthz"] != 10266 || ports["metrics"] != 9100 || c.ReadinessProbe.HTTPGet.Port.IntValue() != 10266 || c.LivenessProbe.HTTPGet.Port.IntValue() != 10266 {
		t.Errorf("ports %v, probes on %v and %v", ports, c.ReadinessProbe.HTTPGet.Port, c.LivenessProbe.HTTPGet.Port)
	}
	args := slices.Clone(c.Args)
	for i, a := range args {
		a = strings.ReplaceAll(a, "$(NODE_NAME)", "node-a")
		args[i] = strings.Replace(a, "/etc/ipvsplane/config.conf", conf, 1)
	}
	cmd, rest, err := newApp().rootCommand().Find(args)
	if err != nil || cmd.Name() != "run" {
		t.Fatalf("the DaemonSet's args %v: %v", c.Args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("the DaemonSet's args %v: %v", c.Args, err)
	}
	if f := cmd.Flags(); f.Lookup("log-format").Value.String() != "console" || f.Lookup("log-level").Value.String() != "debug" {
		t.Errorf("args %v", c.Args)
	}

	checkChartMonitoring(t, objs)

	pm, ok := objs["PodMonitor"].(map[string]any)
	if !ok {
		t.Fatal("no PodMonitor")
	}
	spec, _ := pm["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	match, _ := sel["matchLabels"].(map[string]any)
	for k, v := range ds.Spec.Selector.MatchLabels {
		if match[k] != v {
			t.Errorf("the PodMonitor selects %v, the pods are %v", match, ds.Spec.Selector.MatchLabels)
		}
	}
	endpoints, _ := spec["podMetricsEndpoints"].([]any)
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["interval"] != "15s" {
		t.Fatalf("PodMonitor endpoints %v", endpoints)
	}
	// The alerts on the target select job="ipvsplane", the dashboard the
	// node label.
	if job, _ := spec["jobLabel"].(string); ds.Spec.Template.Labels[job] != "ipvsplane" {
		t.Errorf("the PodMonitor's job is the pods' label %q: %q, want ipvsplane", job, ds.Spec.Template.Labels[job])
	}
	relabelings, _ := endpoints[0].(map[string]any)["relabelings"].([]any)
	if len(relabelings) != 1 || relabelings[0].(map[string]any)["targetLabel"] != "node" {
		t.Errorf("PodMonitor relabelings %v, want the node label", relabelings)
	}
}

// checkChartMonitoring checks the PrometheusRule and the dashboard's
// ConfigMap: deploy/monitoring's rules and dashboard, unchanged.
func checkChartMonitoring(t *testing.T, objs map[string]any) {
	t.Helper()
	rules, err := os.ReadFile(monitoringDir + "ipvsplane-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(rules, &want); err != nil {
		t.Fatal(err)
	}
	pr, ok := objs["PrometheusRule"].(map[string]any)
	if !ok {
		t.Fatal("no PrometheusRule")
	}
	if !reflect.DeepEqual(pr["spec"], want) {
		t.Errorf("the PrometheusRule's spec is not deploy/monitoring's rules:\n%v", pr["spec"])
	}
	dashboard, err := os.ReadFile(monitoringDir + "ipvsplane-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	cm, ok := objs["DashboardConfigMap"].(*corev1.ConfigMap)
	if !ok {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Data["ipvsplane-dashboard.json"] != strings.TrimSuffix(string(dashboard), "\n") {
		t.Errorf("dashboard ConfigMap: labels %v, data equal to deploy/monitoring's: %v", cm.Labels, cm.Data["ipvsplane-dashboard.json"] == string(dashboard))
	}
}

// Metrics bind to loopback by default, as kube-proxy's: no metrics port
// is declared, and a PodMonitor, which could not scrape them there, is
// refused with the value to change.
func TestHelmChartMetricsOnLoopback(t *testing.T) {
	h := newHelm(t)
	ds := chartObjects(t, h.run("template", "ipvsplane", chartDir, "--namespace", "kube-system"))["DaemonSet"].(*appsv1.DaemonSet)
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			t.Errorf("a metrics port on loopback is declared: %+v", p)
		}
	}
	cmd := exec.Command(h.path, "template", "ipvsplane", chartDir, "--set", "metrics.podMonitor.enabled=true")
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "config.metricsBindAddress is on loopback") {
		t.Errorf("a PodMonitor with metrics on loopback: %v\n%s", err, out)
	}
}

// Go's profiles are served beside the metrics: the chart refuses them
// on an address off loopback, where a PodMonitor's scrape address would
// open them to anyone reaching the node.
func TestHelmChartProfilingOffLoopback(t *testing.T) {
	h := newHelm(t)
	h.run("template", "ipvsplane", chartDir, "--set", "config.enableProfiling=true")
	cmd := exec.Command(h.path, "template", "ipvsplane", chartDir, "--set", "config.enableProfiling=true",
		"--set", "config.metricsBindAddress=0.0.0.0:10249", "--set", "metrics.podMonitor.enabled=true")
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "config.enableProfiling: pprof is served on config.metricsBindAddress") {
		t.Errorf("profiling with metrics off loopback: %v\n%s", err, out)
	}
}

// `kubectl apply -k deploy/` and `kubectl apply -f deploy/` install the
// same objects: kubectl's kustomize builds from deploy/Kustomization
// exactly the files -f reads.
func TestDeployKustomizeMatchesFiles(t *testing.T) {
	kubectl, err := controlplane.KubeProgram("kubectl")
	testutil.Require(t, err == nil, "kubectl "+controlplane.KubeVersion+" (run hack/build-kube kubectl)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	built, err := exec.CommandContext(ctx, kubectl, "kustomize", "../../../deploy").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/: %v", err)
	}
	got, want := chartObjects(t, built), deployObjects(t)
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("kustomize built %v, the files hold %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for kind := range want {
		if !equality.Semantic.DeepEqual(got[kind], want[kind]) {
			t.Errorf("%s differs between kubectl kustomize and the file", kind)
		}
	}
}

// template renders the chart as release edge in namespace net with the
// values given as YAML, and returns helm's output, stderr included, and
// its error.
func (h *helmCmd) template(values string) ([]byte, error) {
	h.t.Helper()
	file := filepath.Join(h.t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.path, "template", "edge", chartDir, "--namespace", "net", "--values", file)
	cmd.Env = h.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return append(out, stderr.Bytes()...), err
}

// The ServiceAccount and the RBAC objects are the chart's to create or
// the operator's: an existing account by name, no ClusterRole or binding.
func TestHelmChartServiceAccountAndRBAC(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		values        string
		account       string
		kinds, absent []string
	}{
		{"", "edge-ipvsplane", []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}, nil},
		{"serviceAccount: {name: proxy}", "proxy", []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}, nil},
		{"serviceAccount: {create: false, name: node-proxier}", "node-proxier", []string{"ClusterRole", "ClusterRoleBinding"}, []string{"ServiceAccount"}},
		{"serviceAccount: {create: false}\nrbac: {create: false}", "default", nil, []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}},
	} {
		out, err := h.template(tc.values)
		if err != nil {
			t.Errorf("values %q: %v\n%s", tc.values, err, out)
			continue
		}
		objs := chartObjects(t, out)
		if got := objs["DaemonSet"].(*appsv1.DaemonSet).Spec.Template.Spec.ServiceAccountName; got != tc.account {
			t.Errorf("values %q: the pods run as %q, want %q", tc.values, got, tc.account)
		}
		for _, kind := range tc.kinds {
			if objs[kind] == nil {
				t.Errorf("values %q: no %s", tc.values, kind)
			}
		}
		for _, kind := range tc.absent {
			if objs[kind] != nil {
				t.Errorf("values %q: a %s", tc.values, kind)
			}
		}
		if sa, ok := objs["ServiceAccount"].(*corev1.ServiceAccount); ok && sa.Name != tc.account {
			t.Errorf("values %q: ServiceAccount %s, the pods run as %s", tc.values, sa.Name, tc.account)
		}
		if b, ok := objs["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding); ok && (b.Subjects[0].Name != tc.account || b.Subjects[0].Namespace != "net") {
			t.Errorf("values %q: the binding's subjects %+v", tc.values, b.Subjects)
		}
	}
}

// The container's securityContext is merged over the default (privileged,
// NET_ADMIN); the pod's securityContext, extra environment variables,
// volumes and mounts are added to the chart's own.
func TestHelmChartPodValues(t *testing.T) {
	h := newHelm(t)
	out, err := h.template(`
securityContext: {privileged: false, readOnlyRootFilesystem: true}
podSecurityContext: {seccompProfile: {type: RuntimeDefault}}
extraEnv:
- {name: GODEBUG, value: "netdns=go"}
extraVolumes:
- {name: xtables-lock, hostPath: {path: /run/xtables.lock, type: FileOrCreate}}
extraVolumeMounts:
- {name: xtables-lock, mountPath: /run/xtables.lock}
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pod := chartObjects(t, out)["DaemonSet"].(*appsv1.DaemonSet).Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", pod.SecurityContext)
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name)
	}
	if !slices.Equal(env, []string{"NODE_NAME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "GODEBUG"}) || c.Env[3].Value != "netdns=go" {
		t.Errorf("env %+v", c.Env)
	}
	var volumes, mounts []string
	for _, v := range pod.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name+"="+m.MountPath)
	}
	if !slices.Equal(volumes, []string{"config", "run", "xtables-lock"}) || pod.Volumes[2].HostPath == nil {
		t.Errorf("volumes %+v", pod.Volumes)
	}
	if !slices.Equal(mounts, []string{"config=/etc/ipvsplane", "run=/run/ipvsplane", "xtables-lock=/run/xtables.lock"}) {
		t.Errorf("mounts %v", mounts)
	}
}

// Values that cannot work fail the render with a message naming the value:
// the schema's types and choices (a log format the binary refuses, a
// value the chart does not have), and the template's checks of the API
// server's address. An IPv6 address with its port renders.
func TestHelmChartRefusedValues(t *testing.T) {
	h := newHelm(t)
	for values, want := range map[string]string{
		"apiServer: {host: 192.0.2.10}":                         "apiServer.host is set without apiServer.port",
		"apiServer: {port: 6443}":                               "apiServer.port is set without apiServer.host",
		"apiServer: {host: 'https://192.0.2.10', port: 6443}":   `apiServer.host "https://192.0.2.10": give the host name or address alone`,
		"apiServer: {host: '192.0.2.10:6443', port: 6443}":      `apiServer.host "192.0.2.10:6443": give the host name or address alone`,
		"apiServer: {host: 192.0.2.10, port: https}":            "/apiServer/port",
		"apiServer: {host: 192.0.2.10, port: 70000}":            "/apiServer/port",
		"logFormat: text":                                       "/logFormat",
		"privileged: false":                                     "privileged",
		"image: {pullPolicy: Sometimes}":                        "/image/pullPolicy",
		"extraEnv: [{value: x}]":                                "/extraEnv/0",
		"serviceAccount: {create: 'no'}":                        "/serviceAccount/create",
		"metrics: {podMonitor: {enabled: true, interval: 30}}":  "/metrics/podMonitor/interval",
		"apiServer: {host: '2001:db8::1', port: 6443}":          "",
		"apiServer: {host: control-plane.example, port: '443'}": "",
	} {
		out, err := h.template(values)
		switch {
		case want == "" && err != nil:
			t.Errorf("values %q: %v\n%s", values, err, out)
		case want != "" && (err == nil || !strings.Contains(string(out), want)):
			t.Errorf("values %q: %v, want a failure naming %q:\n%s", values, err, want, out)
		}
	}
}
