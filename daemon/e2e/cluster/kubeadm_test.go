//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
)

// The markers before the docs' blocks: docRuns before a block
// TestKubeadmMigration runs, docSame before a block of the guide whose
// commands are docs/kubeadm.md's (TestKubeadmDocBlocks).
const (
	docRuns = "<!-- TestKubeadmMigration runs this block -->"
	docSame = "<!-- TestKubeadmMigration: docs/kubeadm.md's block runs these commands -->"
)

// ourImage is the name of ipvsplane's image in every manifest and doc.
const ourImage = "ghcr.io/ipvsplane/ipvsplane:"

// docs/kubeadm.md's migration on a cluster set up as kubeadm sets one up
// (vmtest -proxy kubeadm: the pinned kubeadm's kubeadm-config and its
// kube-proxy addon, in its default iptables mode), with the commands read
// from the docs, so that the docs cannot say one thing and the test do
// another: the image built with `make image` and imported on each node
// (docs/migrating-from-kube-proxy.md, "The image"), then docs/kubeadm.md's
// block, whose commands naming NODE run for each node in turn. Each node
// ends with ipvsplane Ready and kube-proxy's pod gone, kube-proxy's
// DaemonSet is gone, no pod of ipvsplane's image is ever in
// CrashLoopBackOff or ImagePullBackOff or restarts, and a client on every
// node (TestTakeoverFromKubeProxy's, started once the image is imported)
// finds the Services answering throughout the migration. `kubeadm upgrade
// node`'s phase addon/kube-proxy, which would bring kube-proxy's
// DaemonSet back before the migration, leaves it out after it (the
// kubeadm-config step 1 writes). (TestKubeadmDocBlocks checks that the
// guide's own blocks for kubeadm clusters are this block's commands.) Run
// by make test-migration.
func TestKubeadmMigration(t *testing.T) {
	c := newCluster(t)
	if c.proxy != "kubeadm" {
		t.Fatalf("the cluster's proxy is %q: this test starts from kubeadm's kube-proxy (make test-migration)", c.proxy)
	}
	images, migration := kubeadmDocBlocks(t)
	tk := &takeover{c: c, ns: c.namespace(t, "kubeadm")}
	for _, node := range c.readyNodes(t) {
		tk.nodes = append(tk.nodes, node.Name)
	}
	problems := c.watchOurPods(t)
	t.Cleanup(func() {
		for _, p := range problems() {
			t.Errorf("a pod of ipvsplane's image: %s", p)
		}
	})
	// Before the migration, an upgrade of the control plane would bring
	// kube-proxy's DaemonSet back as kubeadm makes it (--dry-run prints
	// the addon's objects instead of applying them).
	c.apiServerPod(t, tk.nodes[0])
	if out := c.kubeadmUpgradeNode(t, tk.nodes[0], "--dry-run"); !strings.Contains(out, "\nkind: DaemonSet\n") {
		t.Errorf("kubeadm upgrade node --dry-run before the migration: no DaemonSet applied:\n%s", out)
	}
	sh := c.newDocShell(t, tk.ns, tk.nodes)
	imports := time.Now()
	for _, block := range images {
		sh.run(t, block, nil)
	}
	imported := time.Since(imports)
	// The traffic from here, as the nodes move: unpacking the image
	// stalls an emulated node for seconds (no such stall under the
	// migration itself on an idle machine), which no operator's node
	// shows.
	c.echoBackends(t, tk.ns)
	clients := tk.startClients(t, "kubeadm")
	before := tk.counts(t, clients)
	start := time.Now()
	sh.run(t, migration, func(node string) { c.servedBy(t, node, "ipvsplane") })
	migrated := time.Since(start)

	c.waitDaemonSet(t, "ipvsplane", int32(len(tk.nodes)))
	// After it, kubeadm-config says proxy.disabled, and the upgrade leaves
	// kube-proxy out.
	const skipped = "[upgrade/addon] Skipping the addon/kube-proxy phase. The addon is disabled."
	if out := c.kubeadmUpgradeNode(t, tk.nodes[0]); !strings.Contains(out, skipped) {
		t.Errorf("kubeadm upgrade node after the migration did not say %q:\n%s", skipped, out)
	}
	if _, err := c.client.AppsV1().DaemonSets("kube-system").Get(context.Background(), "kube-proxy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-proxy's DaemonSet after the migration and kubeadm upgrade node: %v, want it gone", err)
	}
	time.Sleep(10 * time.Second)
	after, report := tk.stopClients(t, clients)
	n, failed := total(after)-total(before), failures(after)-failures(before)
	t.Logf("%d node(s): the image built and imported in %v; every node moved %v after the migration's start (%.3f); "+
		"%d requests from then to the end, %d failed (before it, under kube-proxy: %d, %d failed)\n%s",
		len(tk.nodes), imported.Round(time.Second), migrated.Round(time.Second), float64(start.UnixMicro())/1e6,
		n, failed, total(before), failures(before), report)
	if failed != 0 || disturbed(report, len(clients)) {
		t.Errorf("traffic was disturbed: %d requests failed after the start\nipvsplane's log:\n%s",
			failed, c.daemonLogs(context.Background(), "ipvsplane", tk.nodes...))
	}
}

// kubeadmDocBlocks reads the blocks TestKubeadmMigration runs: the
// guide's image blocks and docs/kubeadm.md's migration, its one block.
func kubeadmDocBlocks(t *testing.T) (images []string, migration string) {
	t.Helper()
	images, err := docBlocks("docs/migrating-from-kube-proxy.md", docRuns)
	if err != nil {
		t.Fatal(err)
	}
	kubeadm, err := docBlocks("docs/kubeadm.md", docRuns)
	if err != nil {
		t.Fatal(err)
	}
	if len(kubeadm) != 1 {
		t.Fatalf("docs/kubeadm.md has %d blocks marked %q, want its migration's alone", len(kubeadm), docRuns)
	}
	return images, kubeadm[0]
}

// servedBy waits until the node's proxy is the DaemonSet proxy's alone:
// its pod there Ready, and no pod of the other left there.
func (c *cluster) servedBy(t *testing.T, node, proxy string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 2*time.Minute, proxy+" alone on "+node, func() error {
		pods, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		var ready, other []string
		for _, pod := range pods.Items {
			switch of := proxyOf(pod); {
			case of == proxy && podReady(pod):
				ready = append(ready, pod.Name)
			case of != "":
				other = append(other, pod.Name)
			}
		}
		if len(ready) != 1 || len(other) != 0 {
			return fmt.Errorf("%s Ready: %v; other proxy pods: %v", proxy, ready, other)
		}
		return nil
	})
}

// proxyOf is the proxy whose DaemonSet made pod, by the labels of
// deploy/kubeadm's and kubeadm's DaemonSets: ipvsplane, kube-proxy, or
// empty for another pod.
func proxyOf(pod corev1.Pod) string {
	switch {
	case pod.Labels["app.kubernetes.io/name"] == "ipvsplane":
		return "ipvsplane"
	case pod.Labels["k8s-app"] == "kube-proxy":
		return "kube-proxy"
	}
	return ""
}

func podReady(pod corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchOurPods watches kube-system's pods from now on and returns what it
// saw go wrong so far with those of ipvsplane's image: a container
// waiting in CrashLoopBackOff, ImagePullBackOff or another image error,
// or restarted.
func (c *cluster) watchOurPods(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	var problems []string
	note := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for _, p := range podProblems(pod) {
			mu.Lock()
			if !seen[p] {
				seen[p] = true
				problems = append(problems, time.Now().Format("15:04:05.000")+" "+p)
			}
			mu.Unlock()
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace("kube-system"))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatal("kube-system's pods: the informer did not sync")
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// badWaits are the reasons a container of ours may never wait for.
var badWaits = map[string]bool{"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "ErrImageNeverPull": true, "InvalidImageName": true}

// podProblems is what is wrong with a pod of ipvsplane's image.
func podProblems(pod *corev1.Pod) []string {
	ours := false
	for _, container := range pod.Spec.Containers {
		ours = ours || strings.HasPrefix(container.Image, ourImage)
	}
	if !ours {
		return nil
	}
	var problems []string
	for _, st := range pod.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil && badWaits[w.Reason] {
			problems = append(problems, fmt.Sprintf("pod %s on %s: container %s waiting, %s: %s", pod.Name, pod.Spec.NodeName, st.Name, w.Reason, w.Message))
		}
		if st.RestartCount > 0 {
			problems = append(problems, fmt.Sprintf("pod %s on %s: container %s restarted %d times", pod.Name, pod.Spec.NodeName, st.Name, st.RestartCount))
		}
	}
	return problems
}

// kubeadmUpgradeNode runs the pinned kubeadm's phase addon/kube-proxy of
// `kubeadm upgrade node` (args added, --dry-run for one) as on a
// control-plane node of the cluster, the node whose upgrade re-applies
// kube-proxy, and returns its output. What kubeadm reads of a
// control-plane node stands in for one: the API server's static pod
// manifest (present, in a private mount namespace's /etc/kubernetes), the
// host name (the node's, in a private UTS namespace) and the API server's
// mirror pod (apiServerPod).
func (c *cluster) kubeadmUpgradeNode(t *testing.T, node string, args ...string) string {
	t.Helper()
	kubeadm, err := controlplane.KubeProgram("kubeadm")
	if err != nil {
		t.Fatal(err)
	}
	const controlPlaneNode = `hostname "$0" && mount -t tmpfs tmpfs /etc && mkdir -p /etc/kubernetes/manifests &&
touch /etc/kubernetes/manifests/kube-apiserver.yaml && exec "$@"`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--uts", "sh", "-c", controlPlaneNode, node,
		kubeadm, "upgrade", "node", "phase", "addon", "kube-proxy", "--kubeconfig=" + c.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm upgrade node phase addon kube-proxy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// apiServerPod makes the pod kubeadm finds its control-plane node's API
// server by, the static pod's mirror in a kubeadm cluster: on the node,
// labelled and annotated with the API server's address as kubeadm's is,
// its container named as kubeadm's (running pause).
func (c *cluster) apiServerPod(t *testing.T, node string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	c.createRunning(t, "kube-system", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "kube-apiserver-" + node,
			Labels:      map[string]string{"component": "kube-apiserver", "tier": "control-plane"},
			Annotations: map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": server.Host},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "kube-apiserver", Image: agnhost, Args: []string{"pause"}}},
		},
	})
	t.Cleanup(func() {
		_ = c.client.CoreV1().Pods("kube-system").Delete(context.Background(), "kube-apiserver-"+node, metav1.DeleteOptions{})
	})
}

// docShell runs the docs' commands as an operator does in a shell at the
// repository's root (bash, each command failing on the failure of any
// part of a pipeline), with the cluster's kubectl first in PATH. The docs
// reach a node with ssh and scp; here they are shell functions that reach
// it through a privileged pod with the node's root at /host
// (nodeRootPod): `ssh NODE [sudo] COMMAND...` runs COMMAND chrooted into
// the node's root, as root; `scp FILE NODE:PATH` copies FILE there (into
// PATH if it ends in a slash).
type docShell struct {
	env   []string
	nodes []string
}

// docShellFunctions are docShell's ssh and scp, reaching the node's pod
// root-NODE in DOC_NAMESPACE.
const docShellFunctions = `
ssh() { node=$1; shift; [ "$1" = sudo ] && shift; kubectl -n "$DOC_NAMESPACE" exec "root-$node" -- chroot /host "$@"; }
scp() {
  node=${2%%:*} dest=${2#*:}
  case $dest in */) dest=$dest$(basename "$1") ;; esac
  kubectl -n "$DOC_NAMESPACE" exec -i "root-$node" -- sh -c 'cat >"/host$1"' sh "$dest" <"$1"
}
set -eo pipefail
`

// newDocShell starts the pods docShell's ssh and scp use, one on each node.
func (c *cluster) newDocShell(t *testing.T, ns string, nodes []string) *docShell {
	t.Helper()
	kubectl, err := controlplane.KubeProgram("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		c.nodeRootPod(t, ns, "root-"+node, node, false)
	}
	return &docShell{nodes: nodes, env: append(os.Environ(),
		"PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+c.kubeconfig,
		"DOC_NAMESPACE="+ns,
	)}
}

// run runs a block's steps (docSteps), a step naming NODE once for each
// node with NODE replaced by its name, calling afterNode (if not nil)
// with the node's name after each.
func (sh *docShell) run(t *testing.T, block string, afterNode func(node string)) {
	t.Helper()
	for _, step := range docSteps(shellCommands(block)) {
		if !step.perNode {
			sh.exec(t, step.commands...)
			continue
		}
		for _, node := range sh.nodes {
			var named []string
			for _, command := range step.commands {
				named = append(named, nodeWord.ReplaceAllString(command, node))
			}
			sh.exec(t, named...)
			if afterNode != nil {
				afterNode(node)
			}
		}
	}
}

// exec runs commands one after the other, each in a shell of its own,
// and fails the test at the first that fails.
func (sh *docShell) exec(t *testing.T, commands ...string) {
	t.Helper()
	for _, command := range commands {
		start := time.Now()
		cmd := exec.Command("bash", "-c", docShellFunctions+command)
		cmd.Dir, cmd.Env = repoRoot, sh.env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("$ %s\n%s(%v)", command, out.String(), time.Since(start).Round(100*time.Millisecond))
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
	}
}
