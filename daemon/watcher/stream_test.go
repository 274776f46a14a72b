package watcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// scriptedKind is one kind of a scripted API server: each watch it is
// asked for is handed to the test, which plays the server's events on it.
type scriptedKind struct {
	watches chan *watch.FakeWatcher
	mu      sync.Mutex
	opts    []metav1.ListOptions
	list    func() (*v1.ServiceList, error)
}

func newScriptedKind(list func() (*v1.ServiceList, error)) *scriptedKind {
	return &scriptedKind{watches: make(chan *watch.FakeWatcher, 8), list: list}
}

func (k *scriptedKind) listWatch() ListWatch {
	return ListWatch{
		List: func(_ context.Context, o metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
			k.mu.Lock()
			k.opts = append(k.opts, o)
			k.mu.Unlock()
			l, err := k.list()
			if err != nil {
				return metav1.ListMeta{}, err
			}
			for i := range l.Items {
				if err := each(&l.Items[i]); err != nil {
					return metav1.ListMeta{}, err
				}
			}
			return l.ListMeta, nil
		},
		Watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			k.mu.Lock()
			k.opts = append(k.opts, o)
			k.mu.Unlock()
			w := watch.NewFakeWithChanSize(16, false)
			k.watches <- w
			return w, nil
		},
	}
}

// calls names the requests made: "watch-list", "watch" or "list".
func (k *scriptedKind) calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, o := range k.opts {
		switch {
		case o.SendInitialEvents != nil && *o.SendInitialEvents:
			out = append(out, "watch-list")
		case o.Watch || o.TimeoutSeconds != nil:
			out = append(out, "watch")
		default:
			out = append(out, "list")
		}
	}
	return out
}

func (k *scriptedKind) next(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-k.watches:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("no watch request")
		return nil
	}
}

// endOfListing is the bookmark that ends a streamed listing.
func endOfListing[T runtime.Object](obj T, rv string) T {
	m := any(obj).(metav1.ObjectMetaAccessor).GetObjectMeta()
	m.SetResourceVersion(rv)
	m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return obj
}

func expired() *metav1.Status {
	return &apierrors.NewResourceExpired("too old resource version").ErrStatus
}

// A streamed listing through a real client-go reflector: objects reach
// the tracker as they arrive; what a failed and retried stream, a
// deletion before the listing's end, or a relist after a broken watch
// left behind is deleted when the listing completes; a stream that fails
// for good falls back to a plain list, which reconciles the same way.
func TestWatchKubernetesStreamedListing(t *testing.T) {
	svc := func(name string, port int32, rv string) *v1.Service {
		return service(func(s *v1.Service) {
			s.Name, s.ResourceVersion = name, rv
			s.Spec.Ports[0].Port = port
		})
	}
	var svcList *v1.ServiceList
	var listMu sync.Mutex
	services := newScriptedKind(func() (*v1.ServiceList, error) {
		listMu.Lock()
		defer listMu.Unlock()
		return svcList, nil
	})
	sliceAPI := newScriptedKind(func() (*v1.ServiceList, error) {
		return nil, fmt.Errorf("slices listed")
	})
	client := &Client{Services: services.listWatch(), EndpointSlices: sliceAPI.listWatch(), WatchList: true}
	tr := NewTracker(TrackerConfig{Node: model.Node{Name: "node-a"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- WatchKubernetes(ctx, KubernetesConfig{Client: client, Tracker: tr}) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("WatchKubernetes returned %v", err)
		}
	}()
	ports := func() string {
		var out []string
		for _, p := range tr.Sync().State.Services {
			out = append(out, fmt.Sprintf("%s:%d", p.Name.Name, p.Port))
		}
		return strings.Join(out, " ")
	}
	expect := func(what, want string) {
		t.Helper()
		var got string
		if !poll(func() bool { got = ports(); return got == want }) {
			t.Fatalf("%s: services %q, want %q", what, got, want)
		}
	}

	sw := sliceAPI.next(t)
	sw.Action(watch.Bookmark, endOfListing(&discoveryv1.EndpointSlice{}, "1"))

	w := services.next(t)
	w.Add(svc("a", 80, "2"))
	w.Add(svc("b", 80, "3"))
	// The objects reach the tracker while the listing streams in.
	expect("first stream under way", "a:80 b:80")
	w.Error(expired())

	w = services.next(t)
	w.Add(svc("a", 81, "4"))
	w.Add(svc("c", 80, "5"))
	w.Delete(svc("c", 80, "6"))
	w.Action(watch.Bookmark, endOfListing(&v1.Service{}, "6"))
	waitFor(t, "synced", tr.Synced)
	// b, handed on by the failed stream, and c, deleted before the
	// listing ended, are gone.
	expect("second stream complete", "a:81")

	// The stream goes on as the watch.
	w.Modify(svc("a", 82, "7"))
	w.Add(svc("d", 80, "8"))
	expect("watched", "a:82 d:80")

	// The watch breaks; the relist streams again, then fails for good
	// and falls back to a plain list.
	listMu.Lock()
	svcList = &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []v1.Service{*svc("d", 80, "8"), *svc("e", 80, "9")}}
	listMu.Unlock()
	w.Error(expired())
	w = services.next(t)
	w.Add(svc("d", 80, "8"))
	w.Add(svc("f", 80, "9"))
	expect("relist under way", "a:82 d:80 f:80")
	w.Error(&apierrors.NewInternalError(fmt.Errorf("etcd is away")).ErrStatus)
	// The watch that follows the list.
	services.next(t)
	// a vanished while the watch was broken, f was handed on by the
	// failed stream and is not in the list.
	expect("listed", "d:80 e:80")

	if got, want := services.calls(), []string{"watch-list", "watch-list", "watch-list", "list", "watch"}; !slices.Equal(got, want) {
		t.Errorf("requests for services: %v, want %v", got, want)
	}
}
