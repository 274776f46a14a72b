package watcher

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// AnnotationTriggerTime is the EndpointSlice annotation that carries when
// the change it reflects was triggered (RFC 3339).
const AnnotationTriggerTime = v1.EndpointsLastChangeTriggerTime

// KubernetesConfig configures [WatchKubernetes].
type KubernetesConfig struct {
	// Client reaches the API server (see [NewClient]); it needs list and
	// watch on services, endpointslices and nodes.
	Client  *Client
	Tracker *Tracker
	// NodeName names this node's Node object, watched for the node's
	// IPs and zone; empty watches none.
	NodeName string
	// OnError, if set, receives each object that could not be used (an
	// [*InvalidError]); the object is skipped.
	OnError func(error)
}

// WatchKubernetes feeds the tracker from the API server's Services,
// EndpointSlices and this node's Node, through client-go reflectors that
// list and then watch each kind, relisting when a watch breaks. The
// objects go straight into the tracker, a listing's one by one as they
// are decoded: none is cached besides what the tracker keeps of it, and
// no listing is held whole (see forwardStore and [ListWatch]). Once the
// Services and the EndpointSlices have been listed, it marks them synced
// in the tracker. It runs until ctx is done and returns ctx's error.
func WatchKubernetes(ctx context.Context, cfg KubernetesConfig) error {
	// Changes made before the watch started were programmed by whoever
	// ran before; their latency is not ours to report.
	start := time.Now()
	report := func(err error) {
		if err != nil && cfg.OnError != nil {
			cfg.OnError(err)
		}
	}
	tr := cfg.Tracker
	// Like kube-proxy, let the API server leave out what it does not
	// handle: Services of another proxy or without a cluster IP, and the
	// EndpointSlices of headless services. The tracker checks again.
	serviceSelector := func(o *metav1.ListOptions) {
		o.LabelSelector = "!" + LabelServiceProxyName
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	}
	sliceSelector := func(o *metav1.ListOptions) { o.LabelSelector = "!" + LabelHeadless }
	services := newForwardStore(
		func(o runtime.Object) { report(tr.SetService(o.(*v1.Service))) },
		func(namespace, name string, _ runtime.Object) { tr.DeleteService(namespace, name) })
	slices := newForwardStore(
		func(o runtime.Object) {
			s := o.(*discoveryv1.EndpointSlice)
			report(tr.SetEndpointSlice(s, triggerTime(s, start)))
		},
		func(namespace, name string, _ runtime.Object) { tr.DeleteEndpointSlice(namespace, name) })
	c := cfg.Client
	stores := []*forwardStore{services, slices}
	reflectors := []*cache.Reflector{
		reflector(&v1.Service{}, services, c.Services, c.WatchList, serviceSelector),
		reflector(&discoveryv1.EndpointSlice{}, slices, c.EndpointSlices, c.WatchList, sliceSelector),
	}
	if cfg.NodeName != "" {
		nodes := newForwardStore(
			func(o runtime.Object) { report(tr.SetNode(o.(*v1.Node))) },
			func(_, name string, _ runtime.Object) { tr.DeleteNode(name) })
		stores = append(stores, nodes)
		reflectors = append(reflectors, reflector(&v1.Node{}, nodes, c.Nodes, c.WatchList, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}))
	}

	// A reflector stopped while listing does not wait for the list; once
	// the reflectors returned, nothing more reaches the tracker.
	defer func() {
		for _, r := range stores {
			r.stop()
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, r := range reflectors {
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	for _, in := range []struct {
		kind  Kind
		store *forwardStore
	}{{Services, services}, {EndpointSlices, slices}} {
		if !cache.WaitForCacheSync(ctx.Done(), in.store.HasSynced) {
			return ctx.Err()
		}
		tr.MarkSynced(in.kind)
	}
	<-ctx.Done()
	return ctx.Err()
}

// reflector lists and watches one kind of object through lw, with the
// options narrowed by modify, into store; watchList says whether lw can
// stream the initial listing.
func reflector(kind runtime.Object, store *forwardStore, lw ListWatch, watchList bool, modify func(*metav1.ListOptions)) *cache.Reflector {
	clw := &cache.ListWatch{
		// The objects listed are handed on as they are decoded; the
		// reflector gets their placeholders.
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			modify(&o)
			l := &listedList{}
			lm, err := lw.List(ctx, o, func(obj runtime.Object) error {
				p, err := store.handOn(obj)
				if err != nil {
					return err
				}
				l.Items = append(l.Items, p)
				return nil
			})
			if err != nil {
				return nil, err
			}
			l.ListMeta = lm
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			modify(&o)
			return lw.Watch(ctx, o)
		},
	}
	return cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(clw, watchListSupport(watchList)),
		kind, store, cache.ReflectorOptions{})
}

// watchListSupport tells a reflector whether the client can stream the
// initial listing, in the form client-go asks (see
// k8s.io/client-go/util/watchlist.DoesClientNotSupportWatchListSemantics).
type watchListSupport bool

func (s watchListSupport) IsWatchListSemanticsUnSupported() bool { return !bool(s) }

// triggerTime returns the slice's trigger time if it is after start;
// otherwise, or if the annotation is missing or malformed, zero.
func triggerTime(s *discoveryv1.EndpointSlice, start time.Time) time.Time {
	t, err := time.Parse(time.RFC3339, s.Annotations[AnnotationTriggerTime])
	if err != nil || !t.After(start) {
		return time.Time{}
	}
	return t
}
