//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// agnhost is the e2e suite's test image, as hack/build-images tags it.
const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"

// cluster is the running cluster the tests share, from vmtest -node's
// variables.
type cluster struct {
	client     kubernetes.Interface
	kubeconfig string
	nodeName   string
	nodeIP     string
	proxy      string
	install    string // kubectl (apply -k deploy/) or helm (charts/ipvsplane)
	nodeIP6    string
	// lbPrefix and lbPrefix6 are where the test picks load balancers'
	// addresses: the test's namespace routes them to the node.
	lbPrefix, lbPrefix6 netip.Prefix
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	kubeconfig := os.Getenv("KUBECONFIG")
	testutil.Require(t, kubeconfig != "" && os.Getenv("IPVSPLANE_NODE_NAME") != "",
		"a cluster from daemon/internal/testing/vmtest -node (make test-cluster)")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{
		client:     client,
		kubeconfig: kubeconfig,
		nodeName:   os.Getenv("IPVSPLANE_NODE_NAME"),
		nodeIP:     os.Getenv("IPVSPLANE_NODE_IP"),
		nodeIP6:    os.Getenv("IPVSPLANE_NODE_IP6"),
		proxy:      os.Getenv("IPVSPLANE_NODE_PROXY"),
		install:    os.Getenv("IPVSPLANE_NODE_INSTALL"),
	}
	if c.lbPrefix, err = netip.ParsePrefix(os.Getenv("IPVSPLANE_NODE_LB_CIDR")); err != nil {
		t.Fatalf("IPVSPLANE_NODE_LB_CIDR: %v", err)
	}
	if c.lbPrefix6, err = netip.ParsePrefix(os.Getenv("IPVSPLANE_NODE_LB_CIDR6")); err != nil {
		t.Fatalf("IPVSPLANE_NODE_LB_CIDR6: %v", err)
	}
	return c
}

// namespace creates a namespace for one test, deleted at its end.
func (c *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// kubectl runs kubectl against the cluster and returns its standard output.
func (c *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	path, err := controlplane.KubeProgram("kubectl")
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig=" + c.kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// exec runs a shell command in a pod's first container.
func (c *cluster) exec(ctx context.Context, ns, pod, script string) (string, error) {
	return c.kubectl(ctx, "-n", ns, "exec", pod, "--", "sh", "-c", script)
}

// runPod starts an agnhost pod with args and waits until it is Running.
func (c *cluster) runPod(t *testing.T, ns, name string, args ...string) {
	t.Helper()
	c.startPod(t, ns, name, false, corev1.Container{Name: "agnhost", Image: agnhost, Args: args})
}

// startPod starts a pod of one container, in the node's network namespace
// and privileged if hostNetwork, and waits until it is Running.
func (c *cluster) startPod(t *testing.T, ns, name string, hostNetwork bool, container corev1.Container) {
	t.Helper()
	c.startPodOn(t, ns, name, "", hostNetwork, container)
}

// startPodOn is startPod on the node named node, or where the scheduler
// puts it if node is empty.
func (c *cluster) startPodOn(t *testing.T, ns, name, node string, hostNetwork bool, container corev1.Container) {
	t.Helper()
	container.SecurityContext = &corev1.SecurityContext{Privileged: &hostNetwork}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{container},
		},
	}
	c.createRunning(t, ns, pod)
}

// createRunning creates a pod and waits until it is Running.
func (c *cluster) createRunning(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := pod.Name
	eventually(t, 3*time.Minute, "pod "+ns+"/"+name+" Running", func() error {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && pod.Status.Phase != corev1.PodRunning {
			err = fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return err
	})
}

// serveHostname creates a Deployment of agnhost netexec pods answering
// /hostname on 8080 and a Service for it, and waits until every replica
// is Ready.
func (c *cluster) serveHostname(t *testing.T, ns, name string, replicas int32, svc corev1.ServiceSpec) *corev1.Service {
	t.Helper()
	return c.serveHostnameOn(t, ns, name, "", replicas, svc)
}

// serveHostnameOn is serveHostname with every pod on the node named node,
// or where the scheduler puts them if node is empty.
func (c *cluster) serveHostnameOn(t *testing.T, ns, name, node string, replicas int32, svc corev1.ServiceSpec) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	var nodeSelector map[string]string
	if node != "" {
		nodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  nodeSelector,
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name: "netexec", Image: agnhost, Args: []string{"netexec", "--http-port=8080", "--udp-port=8081"},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
						}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc.Selector = labels
	if len(svc.Ports) == 0 {
		svc.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	}
	s, err := c.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: svc}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitReplicasReady(t, ns, name, replicas)
	return s
}

// dualStack is spec asking for a cluster IP of each family, IPv4 first.
func dualStack(spec corev1.ServiceSpec) corev1.ServiceSpec {
	policy := corev1.IPFamilyPolicyRequireDualStack
	spec.IPFamilyPolicy = &policy
	spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	return spec
}

func (c *cluster) waitReplicasReady(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	eventually(t, 4*time.Minute, fmt.Sprintf("deployment %s/%s with %d ready replicas", ns, name, replicas), func() error {
		dep, err := c.client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && (dep.Status.ReadyReplicas != replicas || dep.Status.UpdatedReplicas != replicas) {
			err = fmt.Errorf("%d ready, %d updated", dep.Status.ReadyReplicas, dep.Status.UpdatedReplicas)
		}
		return err
	})
}

// get fetches url from the test process, a client outside the node.
func get(url string) (string, error) {
	_, body, err := getStatus(url)
	return body, err
}

// getStatus is get with the answer's status code.
func getStatus(url string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// eventually retries fn until it succeeds or the time is up.
func eventually(t *testing.T, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	if err := within(timeout, fn); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// within calls fn every second until it returns nil or timeout passes,
// and returns its last error.
func within(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}
