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
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// trafficClient is hack/build-images' image of the takeover's load
// (hack/images/trafficclient): four TCP connections to the Service's echo
// port held open for the whole test, each echoing a line five times a
// second, and a new HTTP request 50 ms after each one ends, each on a new
// connection after a name lookup through the cluster DNS's Service, all in
// one process. A request fails on an error or a lost packet (a
// retransmission on its connection, a name lookup past the resolver's
// first wait), counted and time-stamped in /tmp with how far it got; one
// over 2 s is counted as slow. Touching /tmp/stop ends it. A shell loop of
// curl, as before, spent more of an emulated node's time starting curl
// than on the request, and a 2 s limit on each request measured the
// node's speed, not lost traffic.
const trafficClient = "ipvsplane.test/trafficclient:1"

// kubeProxyModes are the modes of kube-proxy the takeover starts from, in
// the order one cluster runs them: first kubeadm's default, the one make
// test-takeover starts kube-proxy in.
var kubeProxyModes = []string{"iptables", "nftables", "ipvs"}

// docs/migrating-from-kube-proxy.md on a live cluster, from each of
// kube-proxy's modes in turn: kube-proxy (a DaemonSet) serves pods;
// ipvsplane's manifests from deploy/ take the nodes over one by one by
// their label while a client on every node holds connections and opens a
// new one every 50 ms; then the nodes go back to kube-proxy and
// `ipvsplane cleanup --handover` removes ipvsplane's rules. No request may
// fail and no held connection may break; what kube-proxy's mode left in
// the node's rules is gone under ipvsplane and back after the hand-back.
// The one exception is kube-proxy's own: back in nftables mode, kube-proxy
// removes all IPVS state at its start, before its first sync (its
// platformCleanup, as when it is switched from IPVS to nftables mode
// without ipvsplane), so new requests through that node may fail from the
// node's move back until kube-proxy has synced, and only then.
// Between modes kube-proxy is stopped, `kube-proxy --cleanup` run on
// every node and its ConfigMap's mode changed. Run by make test-takeover.
func TestTakeoverFromKubeProxy(t *testing.T) {
	c := newCluster(t)
	if c.proxy != "kube-proxy" {
		t.Fatalf("the cluster's proxy is %q: this test starts from kube-proxy (make test-takeover)", c.proxy)
	}
	overlay := os.Getenv("IPVSPLANE_NODE_OVERLAY")
	testutil.Require(t, overlay != "", "IPVSPLANE_NODE_OVERLAY from vmtest -node -image")
	tk := &takeover{c: c, ns: c.namespace(t, "takeover")}
	for i, node := range c.readyNodes(t) {
		tk.nodes = append(tk.nodes, node.Name)
		tk.readers = append(tk.readers, c.nodeRoot(t, tk.ns, fmt.Sprintf("node-root-%d", i), node.Name))
	}
	c.echoBackends(t, tk.ns)
	// Step 2 of the procedure, with deploy/migration's files: kube-proxy
	// leaves labelled nodes (its pods restart with the patched template),
	// and ipvsplane's DaemonSet selects labelled nodes only; applied, it
	// starts nothing yet.
	tk.patchKubeProxyFile(t, migrationFile("kube-proxy-affinity.yaml"))
	c.waitDaemonSet(t, "kube-proxy", int32(len(tk.nodes)))
	c.applyTakeoverOverlay(t, overlay)
	c.waitDaemonSet(t, "ipvsplane", 0)
	for _, mode := range kubeProxyModes {
		// A mode whose traffic was disturbed leaves the cluster as the
		// next one starts from; one stopped half-way does not.
		tk.finished = false
		if !t.Run(mode, func(t *testing.T) { tk.run(t, mode) }) && !tk.finished {
			break
		}
	}
}

// takeover is the state TestTakeoverFromKubeProxy's modes share.
type takeover struct {
	c       *cluster
	ns      string
	nodes   []string // the nodes' names, in the order they are taken over
	readers []string // per node, the pod that reads its rules (nodeRoot)
	// finished is set when a mode's run reached its end, the nodes
	// back with kube-proxy.
	finished bool
}

// trafficCounts are what one client pod counted so far.
type trafficCounts struct{ ok, fail int }

// run takes the nodes over from kube-proxy in mode and hands them back.
func (tk *takeover) run(t *testing.T, mode string) {
	c, ctx := tk.c, context.Background()
	baseline := tk.restartKubeProxy(t, mode)
	clients := tk.startClients(t, mode)
	leftovers := tk.leftovers(t, mode, baseline)
	start := time.Now()
	// What went wrong before is kube-proxy's, while the clients started.
	before := tk.counts(t, clients)
	countersBefore := tk.allNodeCounters(t)

	// Step 3, node by node: the label moves a node from one to the other;
	// ipvsplane removes the mode's leftovers last in its first sync.
	var tookOver []time.Duration
	for i, node := range tk.nodes {
		tk.moveNode(t, node, "ipvsplane.io/proxy=ipvsplane", "kube-proxy", "ipvsplane", i)
		tookOver = append(tookOver, time.Since(start))
		eventually(t, time.Minute, "kube-proxy's "+mode+" leftovers removed on "+node, func() error {
			return tk.gone(ctx, i, leftovers[i])
		})
	}
	time.Sleep(10 * time.Second)
	over := tk.counts(t, clients)
	countersOver := tk.allNodeCounters(t)
	ipvsplaneLog := c.daemonLogs(ctx, "ipvsplane", tk.nodes...)

	// And back, node by node: kube-proxy first, then ipvsplane's own rules go.
	back := time.Now()
	handedBack, kubeProxyStart := tk.handBack(t, mode, clients)
	for i, node := range tk.nodes {
		eventually(t, time.Minute, "kube-proxy's "+mode+" rules restored on "+node, func() error {
			return tk.present(ctx, i, leftovers[i])
		})
	}
	time.Sleep(10 * time.Second)
	after, report := tk.stopClients(t, clients)
	countersAfter := tk.allNodeCounters(t)

	tk.finished = true
	took := time.Since(start)
	n, failed := total(after)-total(before), failures(after)-failures(before)
	t.Logf("kube-proxy %s mode, %d node(s): from the takeover's start (%.3f) to the end: %d new connections in %v (%.1f/s), %d failed "+
		"(%d of them while kube-proxy started back in %s mode), "+
		"%d held; ipvsplane serving on each node %v after the start (%d requests by then, %d failed); "+
		"kube-proxy back and ipvsplane's rules gone on each node %v after the hand-back began (%.3f); "+
		"before the start, under kube-proxy: %d requests, %d failed; leftovers removed and restored: %v\n"+
		"the nodes' counters that moved in the takeover: %s\nand in the hand-back: %s\n%s",
		mode, len(tk.nodes), float64(start.UnixMicro())/1e6, n, took.Round(time.Second), float64(n)/took.Seconds(), failed,
		kubeProxyStart, mode, 4*len(clients), rounded(tookOver), total(over)-total(before), failures(over)-failures(before),
		rounded(handedBack), float64(back.UnixMicro())/1e6, total(before), failures(before), leftovers,
		tk.countersMoved(countersOver, countersBefore), tk.countersMoved(countersAfter, countersOver), report)
	if mode == "nftables" {
		failed -= kubeProxyStart
	}
	if failed != 0 || disturbed(report, len(clients)) {
		t.Errorf("traffic was disturbed: %d requests failed after the start\nipvsplane's log:\n%s", failed, ipvsplaneLog)
	}
}

// disturbed says whether the clients' report (stopClients) tells of a
// held connection that broke or did not open: each of the clients holds
// four.
func disturbed(report string, clients int) bool {
	return strings.Contains(report, "broke") || strings.Contains(report, "open failed") ||
		strings.Count(report, "held,") != 4*clients
}

// handBack moves every node back to kube-proxy, one after the other, as
// "How to go back" says. It returns how long each took from the start and
// how many requests of the node's own client (clients[i] runs on node i)
// failed while the node waited for kube-proxy's first sync.
func (tk *takeover) handBack(t *testing.T, mode string, clients []string) ([]time.Duration, int) {
	c, ctx := tk.c, context.Background()
	back := time.Now()
	var took []time.Duration
	starting := 0
	for i, node := range tk.nodes {
		own := clients[i : i+1]
		before := failures(tk.counts(t, own))
		tk.moveNode(t, node, "ipvsplane.io/proxy-", "ipvsplane", "kube-proxy", i)
		// kube-proxy makes its rules empty before its first sync fills
		// them: the handover must wait for them, or the node has neither
		// proxy's rules in between.
		// Slow in two emulated guests sharing two cores; how long it took
		// is reported.
		if err := within(4*time.Minute, func() error { return tk.kubeProxySynced(ctx, i, mode) }); err != nil {
			t.Fatalf("kube-proxy's %s rules synced on %s: %v\n%s", mode, node, err, c.daemonLogs(ctx, "kube-proxy", node))
		}
		starting += failures(tk.counts(t, own)) - before
		c.handover(t, tk.ns, fmt.Sprintf("handover-%s-%d", mode, i), node)
		took = append(took, time.Since(back))
	}
	return took, starting
}

// moveNode labels the node (ipvsplane.io/proxy=ipvsplane) or removes its
// label (ipvsplane.io/proxy-), the i'th node to move, and waits until the
// DaemonSet from has left it and the DaemonSet to runs on it.
func (tk *takeover) moveNode(t *testing.T, node, label, from, to string, i int) {
	t.Helper()
	if _, err := tk.c.kubectl(context.Background(), "label", "node", node, label); err != nil {
		t.Fatal(err)
	}
	tk.c.waitDaemonSet(t, from, int32(len(tk.nodes)-i-1))
	tk.c.waitDaemonSet(t, to, int32(i+1))
}

// startClients starts a client running trafficScript on every node and
// waits until each has made requests and holds its four connections.
func (tk *takeover) startClients(t *testing.T, mode string) []string {
	var clients []string
	for i, node := range tk.nodes {
		name := fmt.Sprintf("client-%s-%d", mode, i)
		tk.c.startPodOn(t, tk.ns, name, node, false, corev1.Container{Name: "client", Image: trafficClient, ImagePullPolicy: corev1.PullNever})
		clients = append(clients, name)
	}
	ctx := context.Background()
	for _, client := range clients {
		eventually(t, 2*time.Minute, "traffic from "+client+" flowing through kube-proxy", func() error {
			if got, err := tk.readCounts(ctx, client); err != nil || got.ok < 20 {
				return fmt.Errorf("%d requests so far (%v)", got.ok, err)
			}
			_, err := tk.c.exec(ctx, tk.ns, client, "test -e /tmp/open-1 -a -e /tmp/open-2 -a -e /tmp/open-3 -a -e /tmp/open-4")
			return err
		})
	}
	return clients
}

// stopClients ends the clients' traffic and returns their counts and what
// they wrote about their held connections and failures; the pods go.
func (tk *takeover) stopClients(t *testing.T, clients []string) ([]trafficCounts, string) {
	ctx := context.Background()
	for _, client := range clients {
		if _, err := tk.c.exec(ctx, tk.ns, client, "touch /tmp/stop"); err != nil {
			t.Fatal(err)
		}
	}
	var report strings.Builder
	for _, client := range clients {
		eventually(t, time.Minute, client+" to finish", func() error {
			_, err := tk.c.exec(ctx, tk.ns, client, "test -e /tmp/done")
			return err
		})
		out, _ := tk.c.exec(ctx, tk.ns, client, "cat /tmp/latency /tmp/held /tmp/resets /tmp/fails 2>/dev/null")
		fmt.Fprintf(&report, "%s:\n%s", client, out)
	}
	counts := tk.counts(t, clients)
	if _, err := tk.c.kubectl(ctx, append([]string{"-n", tk.ns, "delete", "pod", "--wait=false"}, clients...)...); err != nil {
		t.Error(err)
	}
	return counts, report.String()
}

func (tk *takeover) readCounts(ctx context.Context, client string) (trafficCounts, error) {
	var got trafficCounts
	out, err := tk.c.exec(ctx, tk.ns, client, "cat /tmp/counts")
	if err == nil {
		_, err = fmt.Sscanf(out, "%d %d", &got.ok, &got.fail)
	}
	return got, err
}

func (tk *takeover) counts(t *testing.T, clients []string) []trafficCounts {
	t.Helper()
	var all []trafficCounts
	for _, client := range clients {
		got, err := tk.readCounts(context.Background(), client)
		if err != nil {
			t.Fatalf("%s's counts: %v", client, err)
		}
		all = append(all, got)
	}
	return all
}

// total is the number of requests the clients made, failures those that failed.
func total(counts []trafficCounts) int {
	n := 0
	for _, c := range counts {
		n += c.ok + c.fail
	}
	return n
}

func failures(counts []trafficCounts) int {
	n := 0
	for _, c := range counts {
		n += c.fail
	}
	return n
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
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

// migrationDir is deploy/migration, the files the procedure uses, read
// from the repository as the guide has operators use them.
const migrationDir = "../../../deploy/migration"

// migrationFile is the path of a file of deploy/migration.
func migrationFile(name string) string {
	return filepath.Join(migrationDir, name)
}

// applyTakeoverOverlay applies deploy/ (through vmtest's overlay, which
// sets the image and the API server's address) with the node affinity
// the procedure adds, deploy/migration's Component: only nodes labelled
// ipvsplane.io/proxy=ipvsplane.
func (c *cluster) applyTakeoverOverlay(t *testing.T, base string) {
	t.Helper()
	dir := t.TempDir()
	component, err := filepath.Abs(migrationFile("ipvsplane-affinity"))
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes only relative paths.
	var rel [2]string
	for i, p := range []string{base, component} {
		if rel[i], err = filepath.Rel(dir, p); err != nil {
			t.Fatal(err)
		}
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources:\n- " + rel[0] + "\ncomponents:\n- " + rel[1] + "\n"
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

// handover runs `ipvsplane cleanup --handover` on a node, the
// procedure's last step, from deploy/migration/handover.yaml with the
// node's name filled in; the pod is named name in the test's namespace,
// and its image is the cluster's (vmtest's -image-ref, imported on the
// nodes).
func (c *cluster) handover(t *testing.T, ns, name, node string) {
	t.Helper()
	data, err := os.ReadFile(migrationFile("handover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(strings.ReplaceAll(string(data), "NODE", node)), nil, nil)
	if err != nil {
		t.Fatalf("deploy/migration/handover.yaml: %v", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || len(pod.Spec.Containers) != 1 || pod.Spec.NodeName != node {
		t.Fatalf("deploy/migration/handover.yaml: not a pod of one container on node %s: %+v", node, obj)
	}
	pod.ObjectMeta = metav1.ObjectMeta{Name: name}
	pod.Spec.Containers[0].Image = os.Getenv("IPVSPLANE_NODE_IMAGE")
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	c.runPodToCompletion(t, ns, pod)
}

// runToCompletion runs a one-off privileged pod of one container in the
// network namespace of the node named node and waits until it succeeded.
func (c *cluster) runToCompletion(t *testing.T, ns, name, node string, container corev1.Container, volumes ...corev1.Volume) {
	t.Helper()
	c.runPodToCompletion(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:      node,
			HostNetwork:   true,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{container},
			Volumes:       volumes,
		},
	})
}

// runPodToCompletion creates pod in ns and waits until it succeeded.
func (c *cluster) runPodToCompletion(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	name, node := pod.Name, pod.Spec.NodeName
	ctx := context.Background()
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, name+" on "+node, func() error {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			logs, _ := c.kubectl(ctx, "-n", ns, "logs", pod.Name)
			t.Fatalf("%s failed on %s:\n%s", name, node, logs)
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	})
}

// daemonLogs is the log of the DaemonSet's pod on each of the nodes, for a
// failure's message: kubectl logs daemonset/NAME shows one pod's alone.
func (c *cluster) daemonLogs(ctx context.Context, name string, nodes ...string) string {
	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("daemonset %s: %v", name, err)
	}
	pods, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		return fmt.Sprintf("daemonset %s's pods: %v", name, err)
	}
	var b strings.Builder
	for _, node := range nodes {
		for _, pod := range pods.Items {
			if pod.Spec.NodeName == node {
				logs, err := c.kubectl(ctx, "-n", "kube-system", "logs", pod.Name)
				fmt.Fprintf(&b, "%s's pod %s on %s (%v):\n%s\n", name, pod.Name, node, err, logs)
			}
		}
	}
	return b.String()
}
