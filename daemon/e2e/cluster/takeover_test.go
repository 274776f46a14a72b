//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// trafficScript is the client pod's load: four TCP connections to the
// Service's echo port held open for the whole test, each echoing a line
// five times a second, and a new HTTP request every 50 ms (each a new
// connection). Failures are counted and time-stamped in /tmp; touching
// /tmp/stop ends it.
const trafficScript = `
hold() {
  for try in $(seq 20); do exec 3<>/dev/tcp/echo/7000 && break; sleep 0.5; done
  [ -e /dev/fd/3 ] || { echo "connection $1 open failed" >>/tmp/resets; return; }
  touch /tmp/open-$1
  n=0
  while [ ! -e /tmp/stop ]; do
    echo "ping $n" >&3
    if ! read -r -t 5 line <&3 || [ "$line" != "ping $n" ]; then
      echo "$EPOCHREALTIME connection $1 broke after $n echoes: '$line'" >>/tmp/resets
      return
    fi
    n=$((n + 1))
    sleep 0.2
  done
  echo "connection $1 held, $n echoes" >>/tmp/held
}
for i in 1 2 3 4; do hold $i & done
ok=0 fail=0
while [ ! -e /tmp/stop ]; do
  curl -s -m 2 -o /dev/null http://echo/hostname
  rc=$?
  if [ $rc = 0 ]; then ok=$((ok + 1)); else
    fail=$((fail + 1)); echo "$EPOCHREALTIME request failed: curl exit status $rc" >>/tmp/fails
  fi
  echo "$ok $fail" >/tmp/counts
  sleep 0.05
done
wait
touch /tmp/done
sleep 100000
`

// docs/migrating-from-kube-proxy.md on a live cluster: kube-proxy (IPVS
// mode, a DaemonSet) serves pods; ipvsplane's manifests from deploy/ take
// the node over by its label while a client holds connections and opens a
// new one every 50 ms; then the node goes back to kube-proxy and
// `ipvsplane cleanup --handover` removes ipvsplane's rules. No request
// may fail and no held connection may break. Run by make test-takeover.
func TestTakeoverFromKubeProxy(t *testing.T) {
	c := newCluster(t)
	if c.proxy != "kube-proxy" {
		t.Fatalf("the cluster's proxy is %q: this test starts from kube-proxy (make test-takeover)", c.proxy)
	}
	overlay := os.Getenv("IPVSPLANE_NODE_OVERLAY")
	testutil.Require(t, overlay != "", "IPVSPLANE_NODE_OVERLAY from vmtest -node -image")
	ctx := context.Background()
	ns := c.namespace(t, "takeover")
	c.echoBackends(t, ns)
	shell := c.nodeShell(t, ns, "")
	client := c.runTraffic(t, ns)
	readCounts := func() (ok, fail int, err error) {
		out, err := c.exec(ctx, ns, client, "cat /tmp/counts")
		if err == nil {
			_, err = fmt.Sscanf(out, "%d %d", &ok, &fail)
		}
		return ok, fail, err
	}
	counts := func() (ok, fail int) {
		ok, fail, err := readCounts()
		if err != nil {
			t.Fatalf("the client's counts: %v", err)
		}
		return ok, fail
	}
	eventually(t, 2*time.Minute, "traffic flowing through kube-proxy", func() error {
		if ok, _, err := readCounts(); err != nil || ok < 20 {
			return fmt.Errorf("%d requests so far (%v)", ok, err)
		}
		_, err := c.exec(ctx, ns, client, "test -e /tmp/open-1 -a -e /tmp/open-2 -a -e /tmp/open-3 -a -e /tmp/open-4")
		return err
	})
	start := time.Now()
	// What went wrong before is kube-proxy's, while the client started.
	ok0, fail0 := counts()

	// Step 2 of the procedure: ipvsplane's DaemonSet selects labelled
	// nodes only; applied, it starts nothing yet.
	c.applyTakeoverOverlay(t, overlay)
	c.waitDaemonSet(t, "ipvsplane", 0)
	// Step 3: the node's label moves it from one to the other.
	if _, err := c.kubectl(ctx, "label", "node", c.nodeName, "ipvsplane.io/proxy=ipvsplane"); err != nil {
		t.Fatal(err)
	}
	c.waitDaemonSet(t, "kube-proxy", 0)
	c.waitDaemonSet(t, "ipvsplane", 1)
	tookOver := time.Since(start)
	eventually(t, time.Minute, "kube-proxy's chains removed", func() error {
		out, err := c.exec(ctx, ns, shell, "iptables-save -t nat | grep -c '^:KUBE-SERVICES' || true")
		if err != nil || strings.TrimSpace(out) != "0" {
			return fmt.Errorf("KUBE-SERVICES chains: %q %v", out, err)
		}
		return nil
	})
	time.Sleep(10 * time.Second)
	okOver, failOver := counts()
	ipvsplaneLog, _ := c.kubectl(ctx, "-n", "kube-system", "logs", "daemonset/ipvsplane")

	// And back: kube-proxy first, then ipvsplane's own rules go.
	back := time.Now()
	if _, err := c.kubectl(ctx, "label", "node", c.nodeName, "ipvsplane.io/proxy-"); err != nil {
		t.Fatal(err)
	}
	c.waitDaemonSet(t, "ipvsplane", 0)
	c.waitDaemonSet(t, "kube-proxy", 1)
	// kube-proxy makes its chains empty before its first sync fills them
	// in one restore: the handover must wait for their rules, or the node
	// has neither proxy's rules in between.
	eventually(t, 2*time.Minute, "kube-proxy's rules back", func() error {
		out, err := c.exec(ctx, ns, shell, "iptables-save -t nat | grep -c '^-A KUBE-SERVICES' || true")
		if err != nil || strings.TrimSpace(out) == "0" {
			return fmt.Errorf("KUBE-SERVICES chains: %q %v", out, err)
		}
		return nil
	})
	c.handover(t, ns)
	handedBack := time.Since(back)
	time.Sleep(10 * time.Second)

	if _, err := c.exec(ctx, ns, client, "touch /tmp/stop"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the client to finish", func() error {
		_, err := c.exec(ctx, ns, client, "test -e /tmp/done")
		return err
	})
	ok, fail := counts()
	report, _ := c.exec(ctx, ns, client, "cat /tmp/held /tmp/resets /tmp/fails 2>/dev/null")
	took := time.Since(start)
	n := ok + fail - ok0 - fail0
	t.Logf("from the takeover's start (%.3f) to the end: %d new connections in %v (%.1f/s), %d failed, 4 connections held; "+
		"ipvsplane serving %v after the start (%d requests by then, %d failed); kube-proxy back and ipvsplane's rules gone %v after the hand-back began (%.3f); "+
		"before the start, under kube-proxy: %d requests, %d failed\n%s",
		float64(start.UnixMicro())/1e6, n, took.Round(time.Second), float64(n)/took.Seconds(), fail-fail0,
		tookOver.Round(100*time.Millisecond), okOver+failOver-ok0-fail0, failOver-fail0,
		handedBack.Round(100*time.Millisecond), float64(back.UnixMicro())/1e6, ok0+fail0, fail0, report)
	if fail != fail0 || strings.Contains(report, "broke") || strings.Contains(report, "open failed") || strings.Count(report, "held") != 4 {
		t.Errorf("traffic was disturbed: %d requests failed after the start\nipvsplane's log:\n%s", fail-fail0, ipvsplaneLog)
	}
}

// echoBackends runs three pods answering HTTP on 8080 (agnhost netexec)
// and echoing lines on 7000 (socat), behind the Service "echo".
func (c *cluster) echoBackends(t *testing.T, ns string) {
	t.Helper()
	replicas := int32(3)
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "http", Image: agnhost, Args: []string{"netexec", "--http-port=8080"}},
					{Name: "echo", Image: agnhost, Command: []string{"socat", "TCP-LISTEN:7000,fork,reuseaddr", "EXEC:cat"}},
				}},
			},
		},
	}
	ctx := context.Background()
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "echo", Port: 7000, TargetPort: intstr.FromInt32(7000)},
		}},
	}
	if _, err := c.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReplicasReady(t, ns, "echo", replicas)
}

// runTraffic starts the client pod running trafficScript.
func (c *cluster) runTraffic(t *testing.T, ns string) string {
	t.Helper()
	c.startPod(t, ns, "client", false, corev1.Container{Name: "client", Image: agnhost, Command: []string{"bash", "-c", trafficScript}})
	return "client"
}

// applyTakeoverOverlay applies deploy/ (through vmtest's overlay, which
// sets the image and the API server's address) with the node affinity
// the procedure adds: only nodes labelled ipvsplane.io/proxy=ipvsplane.
func (c *cluster) applyTakeoverOverlay(t *testing.T, base string) {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	k := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ` + rel + `
patches:
- target: {kind: DaemonSet, name: ipvsplane}
  patch: |-
    - op: add
      path: /spec/template/spec/affinity
      value:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: ipvsplane.io/proxy, operator: In, values: [ipvsplane]}
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl(context.Background(), "apply", "-k", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// waitDaemonSet waits until a kube-system DaemonSet wants and has ready
// exactly n pods, and no other of its pods is left.
func (c *cluster) waitDaemonSet(t *testing.T, name string, n int32) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 3*time.Minute, "daemonset "+name+" with "+strconv.Itoa(int(n))+" ready pods", func() error {
		ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if st.DesiredNumberScheduled != n || st.NumberReady != n || st.CurrentNumberScheduled != n {
			return fmt.Errorf("desired %d, current %d, ready %d", st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady)
		}
		pods, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err != nil {
			return err
		}
		if len(pods.Items) != int(n) {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
}

// handover runs `ipvsplane cleanup --handover` on the node from a one-off
// pod with the DaemonSet's privileges, as the procedure's last step.
func (c *cluster) handover(t *testing.T, ns string) {
	t.Helper()
	privileged := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "handover"},
		Spec: corev1.PodSpec{
			HostNetwork:   true,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "cleanup", Image: os.Getenv("IPVSPLANE_NODE_IMAGE"), ImagePullPolicy: corev1.PullNever,
				Args:            []string{"cleanup", "--handover"},
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
			}},
		},
	}
	ctx := context.Background()
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "ipvsplane cleanup --handover", func() error {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			logs, _ := c.kubectl(ctx, "-n", ns, "logs", pod.Name)
			t.Fatalf("cleanup --handover failed:\n%s", logs)
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	})
}
