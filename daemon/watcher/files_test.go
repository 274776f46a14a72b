package watcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

const apiManifest = `apiVersion: v1
kind: Service
metadata: {name: api, namespace: demo}
spec:
  clusterIP: 10.96.0.90
  ports: [{port: 443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-1
  namespace: demo
  labels: {kubernetes.io/service-name: api}
addressType: IPv4
ports: [{port: 8443}]
endpoints: [{addresses: [10.244.3.1]}]
`

func TestWatchFiles(t *testing.T) {
	dir := t.TempDir()
	web, err := os.ReadFile("testdata/manifests/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", string(web))
	write("broken.yaml", "# broken\n\napiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: demo}\nspec: {clusterIP: 10.96.0.99, ports: [{port: 0}]}\n")
	write(".hidden.yaml", apiManifest)
	write("notes.txt", apiManifest)

	var mu sync.Mutex
	var errs []string
	tr := NewTracker(TrackerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- WatchFiles(ctx, FilesConfig{Dir: dir, Tracker: tr, OnError: func(err error) {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("WatchFiles returned %v, want context.Canceled", err)
		}
	}()
	waitFor(t, "first reading", tr.Synced)

	var triggers []time.Time
	expect := func(what string, want ...string) {
		t.Helper()
		var got []string
		ok := poll(func() bool {
			u := tr.Sync()
			triggers = append(triggers, u.TriggerTimes.Get(inet.IPv4)...)
			got = got[:0]
			for _, sp := range u.State.Services {
				var eps []string
				for _, ep := range sp.Endpoints {
					eps = append(eps, ep.Addr.String())
				}
				got = append(got, sp.Name.String()+" "+strings.Join(eps, ","))
			}
			return slices.Equal(got, want)
		})
		if !ok {
			t.Fatalf("%s: service ports %q, want %q", what, got, want)
		}
	}
	expect("first reading", "demo/web:http 10.244.1.10,10.244.2.10")
	if len(triggers) != 0 {
		t.Errorf("first reading reported trigger times %v", triggers)
	}
	mu.Lock()
	want := []string{filepath.Join(dir, "broken.yaml") + ":3: Service demo/bad: spec.ports[0].port: 0 is not from 1 to 65535"}
	if !slices.Equal(errs, want) {
		t.Errorf("errors %q, want %q", errs, want)
	}
	mu.Unlock()

	// An atomic replacement, as editors and kubectl-like tools do, with
	// a known modification time: the trigger time.
	mtime := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tmp := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(tmp, []byte(strings.Replace(string(web), "- addresses: [10.244.2.10]", "- addresses: [10.244.2.11]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	expect("file replaced", "demo/web:http 10.244.1.10,10.244.2.11")
	if !slices.ContainsFunc(triggers, mtime.Equal) {
		t.Errorf("trigger times %v do not hold the file's modification time %v", triggers, mtime)
	}

	write("api.yaml", apiManifest)
	expect("file added", "demo/api 10.244.3.1", "demo/web:http 10.244.1.10,10.244.2.11")

	if err := os.Rename(filepath.Join(dir, "api.yaml"), filepath.Join(dir, "api.yml")); err != nil {
		t.Fatal(err)
	}
	write("web.yaml", string(web)+"---\n"+strings.Replace(apiManifest, "10.244.3.1", "10.244.3.2", 1))
	expect("file renamed; an object defined twice is the one read last",
		"demo/api 10.244.3.2", "demo/web:http 10.244.1.10,10.244.2.10")

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	expect("file removed: the other definition holds again", "demo/api 10.244.3.1")

	if err := os.Remove(filepath.Join(dir, "api.yml")); err != nil {
		t.Fatal(err)
	}
	expect("all removed")
}

func TestWatchFilesMissingDir(t *testing.T) {
	err := WatchFiles(context.Background(), FilesConfig{Dir: filepath.Join(t.TempDir(), "none"), Tracker: NewTracker(TrackerConfig{Node: model.Node{}})})
	if err == nil {
		t.Fatal("no error for a missing directory")
	}
}

// A ConfigMap volume: the files are links through "..data", which the
// kubelet swaps to a new directory to update them all at once.
func TestWatchFilesConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "api.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", apiManifest)
	if err := os.Symlink("..data/api.yaml", filepath.Join(dir, "api.yaml")); err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(TrackerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- WatchFiles(ctx, FilesConfig{Dir: dir, Tracker: tr, OnError: func(err error) { t.Error(err) }})
	}()
	defer func() { cancel(); <-done }()

	endpoint := func() string {
		u := tr.Sync()
		if len(u.State.Services) != 1 || len(u.State.Services[0].Endpoints) != 1 {
			return ""
		}
		return u.State.Services[0].Endpoints[0].Addr.String()
	}
	waitFor(t, "first version", func() bool { return tr.Synced() && endpoint() == "10.244.3.1" })
	version("..v2", strings.Replace(apiManifest, "10.244.3.1", "10.244.3.2", 1))
	waitFor(t, "second version", func() bool { return endpoint() == "10.244.3.2" })
}

// Every entry of a manifest's object that is left out is reported with
// the file and line, not only the first.
func TestWatchFilesLocatesEveryEntry(t *testing.T) {
	dir := t.TempDir()
	svc := "# two bad ranges\napiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: demo}\n" +
		"spec: {clusterIP: 10.96.0.98, ports: [{port: 80}], loadBalancerSourceRanges: [bogus, 10.0.0.0/8, 10.1.0.0]}\n"
	if err := os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte(svc), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	tr := NewTracker(TrackerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- WatchFiles(ctx, FilesConfig{Dir: dir, Tracker: tr, OnError: func(err error) {
			mu.Lock()
			errs = append(errs, Unjoin(err)...)
			mu.Unlock()
		}})
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, "first reading", tr.Synced)
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, err := range errs {
		if ie, ok := asInvalid(err); ok && ie.File != "" {
			got = append(got, fmt.Sprintf("%s:%d %s", filepath.Base(ie.File), ie.Line, ie.Field))
		}
	}
	if want := []string{"lb.yaml:2 spec.loadBalancerSourceRanges[0]", "lb.yaml:2 spec.loadBalancerSourceRanges[2]"}; !slices.Equal(got, want) {
		t.Errorf("located errors %q, want %q", got, want)
	}
	if u := tr.Sync(); len(u.State.Services) != 1 || len(u.State.Services[0].LoadBalancerSourceRanges) != 1 {
		t.Errorf("the service is not programmed with its good range: %+v", u.State.Services)
	}
}
