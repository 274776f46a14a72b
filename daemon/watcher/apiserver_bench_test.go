//go:build hosttest

package watcher_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkAPIServerListing measures the first listing of a large
// cluster from the real API server: n Services with one EndpointSlice of
// 10 endpoints each, shaped as the EndpointSlice controller writes them.
// peak-MiB is the most the heap's objects grew while listing (sampled
// every millisecond, garbage not yet collected included, as it counts in
// the process's memory); kept-MiB is what stays live once synced.
// The baseline is client-go's informers, as kube-proxy uses them, with
// their cache of whole objects.
func BenchmarkAPIServerListing(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cp := controlPlane.Get(b)
			cfg := cp.RESTConfig()
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ns := fmt.Sprintf("bench-listing-%d", n)
			start := time.Now()
			if err := createBenchObjects(b.Context(), cs, ns, n); err != nil {
				b.Fatal(err)
			}
			b.Logf("created %d services and %d slices in %v", n, n, time.Since(start).Round(time.Second))
			b.Run("informer", func(b *testing.B) {
				benchListing(b, func(ctx context.Context, synced func()) { informerListing(ctx, b, cs, synced) })
			})
			b.Run("watcher", func(b *testing.B) {
				benchListing(b, func(ctx context.Context, synced func()) { watcherListing(ctx, b, cfg, synced) })
			})
		})
	}
}

// benchListing runs list, which calls synced once everything is listed and
// then keeps watching until ctx is done, and reports its memory.
func benchListing(b *testing.B, list func(ctx context.Context, synced func())) {
	var peak, kept float64
	b.StopTimer()
	for range b.N {
		runtime.GC()
		base := heapObjects()
		ctx, cancel := context.WithCancel(b.Context())
		sampled := make(chan uint64)
		go func() {
			maxHeap := base
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				maxHeap = max(maxHeap, heapObjects())
				select {
				case <-ctx.Done():
					sampled <- maxHeap
					return
				case <-tick.C:
				}
			}
		}()
		syncedc := make(chan struct{})
		var wg sync.WaitGroup
		b.StartTimer()
		wg.Go(func() { list(ctx, func() { close(syncedc) }) })
		select {
		case <-syncedc:
		case <-time.After(5 * time.Minute):
			b.Fatal("not synced in 5 minutes")
		}
		b.StopTimer()
		runtime.GC()
		kept += float64(heapObjects()-base) / (1 << 20)
		cancel()
		peak += float64(<-sampled-base) / (1 << 20)
		wg.Wait()
	}
	b.ReportMetric(peak/float64(b.N), "peak-MiB")
	b.ReportMetric(kept/float64(b.N), "kept-MiB")
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watcherListing feeds a tracker through WatchKubernetes.
func watcherListing(ctx context.Context, b *testing.B, cfg *rest.Config, synced func()) {
	client, err := watcher.NewClient(cfg)
	if err != nil {
		b.Error(err)
		return
	}
	tr := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-0"}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = watcher.WatchKubernetes(ctx, watcher.KubernetesConfig{Client: client, Tracker: tr, NodeName: "node-0"})
	}()
	for !tr.Synced() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	// What a first sync reads, so the tracker's state is counted whole.
	tr.Sync()
	synced()
	<-done
}

// informerListing fills client-go informers for Services and
// EndpointSlices.
func informerListing(ctx context.Context, b *testing.B, cs kubernetes.Interface, synced func()) {
	f := informers.NewSharedInformerFactory(cs, 0)
	svcs := f.Core().V1().Services().Informer()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcs.HasSynced, slices.HasSynced) {
		b.Error("informers not synced")
		return
	}
	synced()
	<-ctx.Done()
}

// createBenchObjects creates, in namespace ns, n Services of one port
// and for each an EndpointSlice of 10 ready endpoints on 10 nodes with
// their pods as targets.
func createBenchObjects(ctx context.Context, cs kubernetes.Interface, ns string, n int) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return testutil.Parallel(ctx, 32, 0, n, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("svc-%d", i)
		svc, err := cs.CoreV1().Services(ns).Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: v1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ready, port, proto := true, int32(8080), v1.ProtocolTCP
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name: name + "-abcde",
				Labels: map[string]string{
					watcher.LabelServiceName:           name,
					discoveryv1.LabelManagedBy:         "endpointslice-controller.k8s.io",
					"endpointslice.kubernetes.io/hash": "0123456789",
				},
				Annotations: map[string]string{watcher.AnnotationTriggerTime: time.Now().UTC().Format(time.RFC3339)},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID,
					Controller: &ready, BlockOwnerDeletion: &ready,
				}},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: &port, Protocol: &proto}},
		}
		for j := range 10 {
			node := fmt.Sprintf("node-%d", j)
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{netip.AddrFrom4([4]byte{10, byte(100 + j), byte(i >> 8), byte(i)}).String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(false)},
				NodeName:   &node,
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j), UID: svc.UID},
			})
		}
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
		return err
	})
}
