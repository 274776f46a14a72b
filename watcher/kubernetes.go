package watcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// AnnotationTriggerTime is the EndpointSlice annotation that carries when
// the change it reflects was triggered (RFC 3339).
const AnnotationTriggerTime = v1.EndpointsLastChangeTriggerTime

// KubernetesConfig configures [WatchKubernetes].
type KubernetesConfig struct {
	// Client reaches the API server; it needs list and watch on services,
	// endpointslices and nodes.
	Client  kubernetes.Interface
	Tracker *Tracker
	// NodeName names this node's Node object, watched for the node's
	// IPs and zone; empty watches none.
	NodeName string
	// ResyncPeriod is how often the informers replay their caches; 0
	// never.
	ResyncPeriod time.Duration
	// OnError, if set, receives each object that could not be used (an
	// [*InvalidError]); the object is skipped.
	OnError func(error)
}

// WatchKubernetes feeds the tracker from the API server's Services,
// EndpointSlices and this node's Node, through client-go shared informers,
// until ctx is done. Once the Services and the EndpointSlices have been
// listed, it marks them synced in the tracker. It returns ctx's error.
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
	// Like kube-proxy, let the API server leave out what no proxy of
	// this kind handles; the tracker checks the labels again.
	selector := func(o *metav1.ListOptions) {
		o.LabelSelector = "!" + LabelServiceProxyName + ",!" + LabelHeadless
	}
	services := coreinformers.NewFilteredServiceInformer(cfg.Client, metav1.NamespaceAll, cfg.ResyncPeriod, cache.Indexers{}, selector)
	slices := discoveryinformers.NewFilteredEndpointSliceInformer(cfg.Client, metav1.NamespaceAll, cfg.ResyncPeriod, cache.Indexers{}, selector)
	informers := []cache.SharedIndexInformer{services, slices}

	svcReg, err := services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { report(tr.SetService(obj.(*v1.Service))) },
		UpdateFunc: func(_, obj any) { report(tr.SetService(obj.(*v1.Service))) },
		DeleteFunc: func(obj any) {
			if s, ok := deleted[*v1.Service](obj); ok {
				tr.DeleteService(s.Namespace, s.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch services: %w", err)
	}
	sliceReg, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s := obj.(*discoveryv1.EndpointSlice)
			report(tr.SetEndpointSlice(s, triggerTime(s, start)))
		},
		UpdateFunc: func(_, obj any) {
			s := obj.(*discoveryv1.EndpointSlice)
			report(tr.SetEndpointSlice(s, triggerTime(s, start)))
		},
		DeleteFunc: func(obj any) {
			if s, ok := deleted[*discoveryv1.EndpointSlice](obj); ok {
				tr.DeleteEndpointSlice(s.Namespace, s.Name, triggerTime(s, start))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch endpointslices: %w", err)
	}
	if cfg.NodeName != "" {
		nodes := coreinformers.NewFilteredNodeInformer(cfg.Client, cfg.ResyncPeriod, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		})
		informers = append(informers, nodes)
		if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { report(tr.SetNode(obj.(*v1.Node))) },
			UpdateFunc: func(_, obj any) { report(tr.SetNode(obj.(*v1.Node))) },
			DeleteFunc: func(obj any) {
				if n, ok := deleted[*v1.Node](obj); ok {
					tr.DeleteNode(n.Name)
				}
			},
		}); err != nil {
			return fmt.Errorf("watch node %s: %w", cfg.NodeName, err)
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range informers {
		// Nothing here reads managed fields; dropping them saves memory
		// in large clusters.
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return err
		}
		wg.Go(func() { inf.Run(ctx.Done()) })
	}
	for _, in := range []struct {
		kind Kind
		reg  cache.ResourceEventHandlerRegistration
	}{{Services, svcReg}, {EndpointSlices, sliceReg}} {
		// The registration has synced once its handler has seen the
		// whole initial list, not only once the cache holds it.
		if !cache.WaitForCacheSync(ctx.Done(), in.reg.HasSynced) {
			return ctx.Err()
		}
		tr.MarkSynced(in.kind)
	}
	<-ctx.Done()
	return ctx.Err()
}

// deleted returns the object of a delete notification, which is either
// the object or, when the watch missed the deletion, a tombstone holding
// its last known state.
func deleted[T any](obj any) (T, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	v, ok := obj.(T)
	return v, ok
}

// triggerTime returns the slice's trigger time if it is after start;
// otherwise, or if the annotation is missing or malformed, zero.
func triggerTime(s *discoveryv1.EndpointSlice, start time.Time) time.Time {
	t, err := time.Parse(time.RFC3339, s.Annotations[AnnotationTriggerTime])
	if err != nil || !t.After(start) {
		return time.Time{}
	}
	return t
}

func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
