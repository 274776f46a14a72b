//go:build hosttest

package watcher_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/kubetest"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/consistencydetector"
)

// Tests of the Kubernetes source against a real kube-apiserver and etcd
// (internal/controlplane): objects written with client-go reach the
// tracker's desired state, through reflectors that survive an API server
// restart.

// apiFixture is one test's view of the shared control plane: a client, a
// namespace of its own, and a tracker fed by WatchKubernetes.
type apiFixture struct {
	t       *testing.T
	cp      *controlplane.ControlPlane
	client  kubernetes.Interface
	ns      string
	tracker *watcher.Tracker
	ctx     context.Context

	mu sync.Mutex
	// contentTypes counts the content types of the responses the
	// watcher's client received; requests lists its requests' URLs.
	contentTypes map[string]int
	requests     []*url.URL
}

func newAPIFixture(t *testing.T, nodeName string) *apiFixture {
	t.Helper()
	return newAPIFixtureFor(t, nodeName, "")
}

// newAPIFixtureFor is newAPIFixture with the watcher's client asking for
// contentType (empty leaves client-go's default).
func newAPIFixtureFor(t *testing.T, nodeName, contentType string) *apiFixture {
	t.Helper()
	cp := controlPlane.Get(t)
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := &apiFixture{t: t, cp: cp, client: client, ns: ns, ctx: ctx,
		tracker:      watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: nodeName}}),
		contentTypes: map[string]int{}}
	cfg := cp.RESTConfig()
	cfg.ContentType = contentType
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			f.mu.Lock()
			f.requests = append(f.requests, req.URL)
			f.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err == nil {
				f.mu.Lock()
				f.contentTypes[resp.Header.Get("Content-Type")]++
				f.mu.Unlock()
			}
			return resp, err
		})
	})
	wc, err := watcher.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- watcher.WatchKubernetes(watchCtx, watcher.KubernetesConfig{
			Client: wc, Tracker: f.tracker, NodeName: nodeName,
			OnError: func(err error) { t.Errorf("object not usable: %v", err) },
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != context.Canceled {
			t.Errorf("WatchKubernetes returned %v, want context.Canceled", err)
		}
	})
	f.waitFor("services and slices listed", func() bool { return f.tracker.Synced() })
	return f
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// waitFor polls cond for a generous while: it waits for delivery through
// the informers, it does not time it.
func (f *apiFixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not reached\n%s", what, f.cp.Logs(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expect waits until the tracker's state for the fixture's namespace reads
// want (see summarize).
func (f *apiFixture) expect(what string, want ...string) {
	f.t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = summarize(f.tracker.Sync().State, f.ns)
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: services in %s (-want +got):\n%s", what, f.ns, cmp.Diff(want, got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// summarize renders the service ports of namespace ns, one line each:
// "name:port proto clusterIP:port -> ready endpoints".
func summarize(s model.State, ns string) []string {
	var lines []string
	for _, p := range s.Services {
		if p.Name.Namespace != ns {
			continue
		}
		var eps []string
		for _, e := range p.Endpoints {
			if e.Ready {
				eps = append(eps, fmt.Sprintf("%s:%d", e.Addr, e.Port))
			}
		}
		lines = append(lines, fmt.Sprintf("%s:%s %v %v:%d -> %s",
			p.Name.Name, p.Name.Port, p.Protocol, p.ClusterIPs, p.Port, strings.Join(eps, ",")))
	}
	slices.Sort(lines)
	return lines
}

// createService creates a ClusterIP service with one named TCP port and
// returns its allocated cluster IP.
func (f *apiFixture) createService(name string, port int32) string {
	f.t.Helper()
	got, err := f.client.CoreV1().Services(f.ns).Create(f.ctx, kubetest.Service(f.ns, name, "", port), metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return got.Spec.ClusterIP
}

// putSlice creates or replaces EndpointSlice name of service svc with
// ready endpoints at addrs, port 8080.
func (f *apiFixture) putSlice(svc, name string, addrs ...string) {
	f.t.Helper()
	if err := kubetest.PutSlice(f.ctx, f.client, kubetest.Slice(f.ns, svc, name, 8080, addrs...)); err != nil {
		f.t.Fatal(err)
	}
}

// Services and EndpointSlices created, changed and deleted through the API
// server reach the desired state.
func TestAPIServerServicesAndSlices(t *testing.T) {
	f := newAPIFixture(t, "node-a")
	f.expect("empty namespace")

	web := f.createService("web", 80)
	f.expect("service created", fmt.Sprintf("web:http tcp [%s]:80 -> ", web))

	f.putSlice("web", "web-1", "10.244.1.5", "10.244.1.6")
	f.expect("slice created", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080,10.244.1.6:8080", web))

	f.putSlice("web", "web-2", "10.244.2.7")
	f.expect("second slice merged", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080,10.244.1.6:8080,10.244.2.7:8080", web))

	f.putSlice("web", "web-1", "10.244.1.6", "10.244.1.9")
	f.expect("slice changed", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.6:8080,10.244.1.9:8080,10.244.2.7:8080", web))

	if err := kubetest.UpdateService(f.ctx, f.client, f.ns, "web", func(svc *v1.Service) { svc.Spec.Ports[0].Port = 8000 }); err != nil {
		t.Fatal(err)
	}
	f.expect("service port changed", fmt.Sprintf("web:http tcp [%s]:8000 -> 10.244.1.6:8080,10.244.1.9:8080,10.244.2.7:8080", web))

	if err := f.client.DiscoveryV1().EndpointSlices(f.ns).Delete(f.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("slice deleted", fmt.Sprintf("web:http tcp [%s]:8000 -> 10.244.2.7:8080", web))

	if err := f.client.CoreV1().Services(f.ns).Delete(f.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.expect("service deleted")
}

// The labels filter what kube-proxy's informers filter (issue 15 §1.16):
// Services by the proxy-name label, not the headless one; headless
// Services (cluster IP None) are left out by the API server too.
func TestAPIServerLabels(t *testing.T) {
	f := newAPIFixture(t, "node-a")
	web := f.createService("web", 80)
	f.expect("service created", fmt.Sprintf("web:http tcp [%s]:80 -> ", web))
	label := func(name, label string) {
		if err := kubetest.UpdateService(f.ctx, f.client, f.ns, name, func(svc *v1.Service) { svc.Labels = map[string]string{label: "x"} }); err != nil {
			t.Fatal(err)
		}
	}
	headless := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db"},
		Spec:       v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{{Name: "sql", Port: 5432, Protocol: v1.ProtocolTCP}}},
	}
	if _, err := f.client.CoreV1().Services(f.ns).Create(f.ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	label("web", watcher.LabelHeadless)
	f.putSlice("web", "web-1", "10.244.1.5")
	f.expect("the headless label on a service is not looked at", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080", web))
	label("web", watcher.LabelServiceProxyName)
	f.expect("a service of another proxy is left out")
}

// The informers survive an API server restart: while it is down the state
// keeps every service and no change is reported (no sync would remove or
// reprogram anything), and changes made after it is back arrive.
func TestAPIServerRestart(t *testing.T) {
	f := newAPIFixture(t, "node-a")
	web := f.createService("web", 80)
	f.putSlice("web", "web-1", "10.244.1.5")
	webLine := fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080", web)
	f.expect("before the restart", webLine)

	// Sample the state throughout the outage and the reconnection.
	var (
		mu       sync.Mutex
		samples  int
		bad      []string
		changed  []model.ServicePortName
		sampling = make(chan struct{})
		stopped  = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for {
			u := f.tracker.Sync()
			mu.Lock()
			samples++
			if got := summarize(u.State, f.ns); !cmp.Equal(got, []string{webLine}) {
				bad = append(bad, strings.Join(got, "; "))
			}
			changed = append(changed, u.Changed...)
			mu.Unlock()
			select {
			case <-sampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Killed, as in a crash: the watches break without a goodbye.
	f.cp.KillAPIServer()
	// Long enough for the informers' watches to break and their relists
	// to fail a few times.
	time.Sleep(5 * time.Second)
	start := time.Now()
	if err := f.cp.StartAPIServer(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server back after %v", time.Since(start).Round(time.Millisecond))
	// Give the informers time to reconnect and relist before looking.
	time.Sleep(3 * time.Second)
	close(sampling)
	<-stopped
	mu.Lock()
	t.Logf("%d samples of the state during the outage and reconnection", samples)
	if len(bad) > 0 {
		t.Errorf("state differed from [%s] in %d samples, first: [%s]", webLine, len(bad), bad[0])
	}
	for _, n := range changed {
		if n.Namespace == f.ns {
			t.Errorf("service port %s reported changed across the restart", n)
		}
	}
	mu.Unlock()

	start = time.Now()
	api := f.createService("api", 443)
	f.putSlice("api", "api-1", "10.244.3.1")
	f.putSlice("web", "web-1", "10.244.1.5", "10.244.1.8")
	f.expect("changes after the restart",
		fmt.Sprintf("api:http tcp [%s]:443 -> 10.244.3.1:8080", api),
		fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080,10.244.1.8:8080", web))
	t.Logf("changes made after the restart arrived in %v", time.Since(start).Round(time.Millisecond))
}

// The Node object named by the tracker's node gives its IPs and
// zone; its deletion leaves the configured node.
func TestAPIServerNode(t *testing.T) {
	name := "node-" + strings.ToLower(t.Name())
	f := newAPIFixture(t, name)
	nodes := f.client.CoreV1().Nodes()
	node := func() string {
		n := f.tracker.Sync().State.Node
		return fmt.Sprintf("%s zone=%q %v", n.Name, n.Zone, n.NodeIPs)
	}
	f.waitFor("node without object", func() bool { return node() == name+` zone="" []` })

	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	n, err := nodes.Create(f.ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// Addresses are status: the kubelet reports them through the status
	// subresource.
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "192.0.2.10"},
		{Type: v1.NodeHostName, Address: name},
	}
	if n, err = nodes.UpdateStatus(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := name + ` zone="zone-a" [192.0.2.10]`
	f.waitFor("node object: "+want, func() bool { return node() == want })

	n.Labels[v1.LabelTopologyZone] = "zone-b"
	if n, err = nodes.Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "2001:db8::10"})
	if _, err = nodes.UpdateStatus(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = name + ` zone="zone-b" [192.0.2.10 2001:db8::10]`
	f.waitFor("node changed: "+want, func() bool { return node() == want })

	if err := nodes.Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = name + ` zone="" []`
	f.waitFor("node deleted: "+want, func() bool { return node() == want })
}

// The watcher's client speaks protobuf unless told otherwise, and JSON
// when told.
func TestAPIServerContentTypes(t *testing.T) {
	for _, tt := range []struct{ name, ask, want string }{
		{"default", "", "application/vnd.kubernetes.protobuf"},
		{"protobuf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"},
		{"json", "application/json", "application/json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newAPIFixtureFor(t, "node-a", tt.ask)
			web := f.createService("web", 80)
			f.putSlice("web", "web-1", "10.244.1.5")
			f.expect("service and slice", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080", web))
			f.mu.Lock()
			defer f.mu.Unlock()
			for ct, n := range f.contentTypes {
				if !strings.HasPrefix(ct, tt.want) {
					t.Errorf("%d responses of type %q, want %s", n, ct, tt.want)
				}
			}
			if len(f.contentTypes) == 0 {
				t.Error("no responses seen")
			}
		})
	}
}

// Each reflector streams its first listing (watch-list), in which the
// store hands each object on as it arrives and keeps a placeholder. An API
// server whose etcd lacks progress notifications (RequestWatchProgress:
// etcd before 3.4.31 or 3.5.13, as Debian 12's 3.4.23) would refuse and
// the reflector list instead; the tests' etcd is the one k8s.io/kubernetes
// requires, as a real cluster's is. client-go's check of a streamed
// listing against a plain one, which transforms both, finds the
// placeholders consistent.
func TestAPIServerListingPath(t *testing.T) {
	defer consistencydetector.SetDataConsistencyDetectionForWatchListEnabledForTest(true)()
	f := newAPIFixture(t, "node-a")
	web := f.createService("web", 80)
	f.putSlice("web", "web-1", "10.244.1.5")
	f.expect("service and slice", fmt.Sprintf("web:http tcp [%s]:80 -> 10.244.1.5:8080", web))
	f.mu.Lock()
	defer f.mu.Unlock()
	streamed, listed := map[string]bool{}, map[string]bool{}
	for _, u := range f.requests {
		resource := path.Base(u.Path)
		q := u.Query()
		switch {
		case q.Get("sendInitialEvents") == "true":
			streamed[resource] = true
		case q.Get("watch") != "true" && q.Get("resourceVersionMatch") != "Exact":
			// The consistency check lists at the exact version streamed;
			// any other list is the reflector's.
			listed[resource] = true
		}
	}
	for _, r := range []string{"services", "endpointslices", "nodes"} {
		switch {
		case !streamed[r]:
			t.Errorf("%s: no streamed listing asked for; requests: %v", r, f.requests)
		case listed[r]:
			// As on an API server whose etcd lacks RequestWatchProgress
			// (before 3.4.31 or 3.5.13): hack/build-kube builds one that
			// has it, as real clusters do.
			t.Errorf("%s: the API server refused to stream the listing and it was listed instead; is etcd the one hack/build-kube builds?", r)
		}
	}
}
