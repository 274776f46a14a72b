package watcher

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// forwardStore is the store a client-go reflector fills: it hands each
// object to the tracker as it comes and keeps only the objects' keys.
// The tracker holds what it converted; an informer's cache of whole
// objects would be a second copy of every Service and EndpointSlice, in a
// large cluster the largest part of the daemon's memory.
//
// The reflector calls it from one goroutine; the mutex only makes synced
// safe to read from another.
type forwardStore struct {
	set func(obj runtime.Object)
	// del is called with the deleted object, or nil when a relist found
	// the object gone and its last state is not kept.
	del func(namespace, name string, obj runtime.Object)

	mu     sync.Mutex
	keys   map[key]struct{}
	synced bool
}

var _ cache.ReflectorStore = (*forwardStore)(nil)

func newForwardStore(set func(runtime.Object), del func(namespace, name string, obj runtime.Object)) *forwardStore {
	return &forwardStore{set: set, del: del, keys: map[key]struct{}{}}
}

func storeKey(obj any) (key, runtime.Object, error) {
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
	s.set(o)
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
	s.mu.Unlock()
	s.del(k.namespace, k.name, o)
	return nil
}

// Replace takes a complete listing: every object in it, and the deletion
// of those known before and missing from it (deleted while the watch was
// down). After the first, the store is synced.
func (s *forwardStore) Replace(list []any, _ string) error {
	seen := make(map[key]struct{}, len(list))
	for _, obj := range list {
		k, o, err := storeKey(obj)
		if err != nil {
			return err
		}
		seen[k] = struct{}{}
		s.set(o)
	}
	s.mu.Lock()
	old := s.keys
	s.keys = seen
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
