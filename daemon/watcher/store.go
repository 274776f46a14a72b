package watcher

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// forwardStore is the store a client-go reflector fills: it hands each
// object to the tracker as it comes and keeps only the objects' keys.
// The tracker holds what it converted; an informer's cache of whole
// objects would be a second copy of every Service and EndpointSlice, in a
// large cluster the largest part of the daemon's memory.
//
// A reflector that streams its listing (watch-list) gathers it in a
// store of its own before it calls Replace; as a [cache.TransformingStore]
// this store has it keep a key-only placeholder ([listed]) of each object
// instead, having handed the object on as it arrived, so the listing is
// never held whole. Replace then only reconciles keys.
//
// A listing does the same through the list function (see reflector),
// which returns the placeholders in a [listedList].
//
// The reflector calls it from one goroutine, except that a list it gave
// up on may still be handing on objects; the mutex makes that and synced
// safe.
type forwardStore struct {
	set func(obj runtime.Object)
	// del is called with the deleted object, or nil when a relist found
	// the object gone and its last state is not kept.
	del func(namespace, name string, obj runtime.Object)

	mu   sync.Mutex
	keys map[key]struct{}
	// handed holds the keys of the objects handed on while a listing
	// streamed in, until a Replace: the tracker has them even if the
	// stream failed and was retried or an object was deleted before the
	// listing ended.
	handed  map[key]struct{}
	synced  bool
	stopped bool
}

var _ cache.TransformingStore = (*forwardStore)(nil)

func newForwardStore(set func(runtime.Object), del func(namespace, name string, obj runtime.Object)) *forwardStore {
	return &forwardStore{set: set, del: del, keys: map[key]struct{}{}, handed: map[key]struct{}{}}
}

// listed stands for an object handed on while a listing streamed in. It
// keeps the UID too, and answers as an object, for client-go's optional
// check of a streamed listing against a plain one
// (KUBE_WATCHLIST_INCONSISTENCY_DETECTOR), which compares the two after
// transforming both.
type listed struct {
	key
	uid types.UID
}

func (l *listed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (l *listed) DeepCopyObject() runtime.Object   { c := *l; return &c }
func (l *listed) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: l.namespace, Name: l.name, UID: l.uid}
}

// listedList is a listing whose objects were handed on.
type listedList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []*listed
}

func (l *listedList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]*listed, len(l.Items))
	for i, p := range l.Items {
		c.Items[i] = p.DeepCopyObject().(*listed)
	}
	return &c
}

// storeKey returns obj's key and obj as an object, nil for a placeholder.
func storeKey(obj any) (key, runtime.Object, error) {
	if l, ok := obj.(*listed); ok {
		return l.key, nil, nil
	}
	o, ok := obj.(runtime.Object)
	if !ok {
		return key{}, nil, fmt.Errorf("watcher: a %T from the API server is not an object", obj)
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return key{}, nil, fmt.Errorf("watcher: %T: %w", obj, err)
	}
	return key{m.GetNamespace(), m.GetName()}, o, nil
}

// Transformer is applied by the reflector to each object of a streamed
// listing as it arrives, after the reflector took its key.
func (s *forwardStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) { return s.handOn(obj) }
}

// handOn gives obj to the tracker and returns its placeholder.
func (s *forwardStore) handOn(obj any) (*listed, error) {
	if l, ok := obj.(*listed); ok {
		return l, nil
	}
	k, o, err := storeKey(obj)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopped
	}
	s.handed[k] = struct{}{}
	s.set(o)
	return &listed{k, m.GetUID()}, nil
}

var errStopped = errors.New("watcher: the Kubernetes source stopped")

// stop makes handOn refuse objects from now on.
func (s *forwardStore) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// Add takes a new object.
func (s *forwardStore) Add(obj any) error { return s.Update(obj) }

// Update takes a changed object.
func (s *forwardStore) Update(obj any) error {
	k, o, err := storeKey(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.keys[k] = struct{}{}
	s.mu.Unlock()
	if o != nil {
		s.set(o)
	}
	return nil
}

// Delete forgets an object.
func (s *forwardStore) Delete(obj any) error {
	k, o, err := storeKey(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.keys, k)
	delete(s.handed, k)
	s.mu.Unlock()
	s.del(k.namespace, k.name, o)
	return nil
}

// Replace takes a complete listing: every object in it (placeholders
// were handed on already), and the deletion of those known before or
// handed on since and missing from it (deleted while the watch was down
// or while the listing streamed in). After the first, the store is
// synced.
func (s *forwardStore) Replace(list []any, _ string) error {
	seen := make(map[key]struct{}, len(list))
	for _, obj := range list {
		k, o, err := storeKey(obj)
		if err != nil {
			return err
		}
		seen[k] = struct{}{}
		if o != nil {
			s.set(o)
		}
	}
	s.mu.Lock()
	old := s.keys
	for k := range s.handed {
		old[k] = struct{}{}
	}
	s.keys, s.handed = seen, map[key]struct{}{}
	s.mu.Unlock()
	for k := range old {
		if _, ok := seen[k]; !ok {
			s.del(k.namespace, k.name, nil)
		}
	}
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	return nil
}

// Resync does nothing: there is no cache to replay.
func (s *forwardStore) Resync() error { return nil }

// HasSynced reports whether a complete listing has been taken.
func (s *forwardStore) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}
