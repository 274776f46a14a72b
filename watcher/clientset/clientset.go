// Package clientset adapts a client-go clientset to [watcher.Client], for
// programs that already have one (a CNI plugin, a controller). The
// ipvsplane daemon does not use it: it builds its client with
// [watcher.NewClient], which does not link the clientset's dozens of API
// groups.
//
// Privileges: the clientset's identity needs list and watch on services,
// endpointslices and nodes. Concurrency: the returned client's functions
// may be called from any goroutine, as the clientset's may.
package clientset

import (
	"context"

	"github.com/ipvsplane/ipvsplane/watcher"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"
)

// New returns a client that lists and watches through cs. Whether it
// streams the initial listing follows cs: client-go's fake clientset
// cannot. Its lists are decoded whole, as a clientset decodes them.
func New(cs kubernetes.Interface) *watcher.Client {
	svcs := cs.CoreV1().Services(metav1.NamespaceAll)
	slices := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)
	nodes := cs.CoreV1().Nodes()
	return &watcher.Client{
		Services: watcher.ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
				l, err := svcs.List(ctx, o)
				if err != nil {
					return metav1.ListMeta{}, err
				}
				return l.ListMeta, eachItem(l.Items, each)
			},
			Watch: svcs.Watch,
		},
		EndpointSlices: watcher.ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
				l, err := slices.List(ctx, o)
				if err != nil {
					return metav1.ListMeta{}, err
				}
				return l.ListMeta, eachItem(l.Items, each)
			},
			Watch: slices.Watch,
		},
		Nodes: watcher.ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
				l, err := nodes.List(ctx, o)
				if err != nil {
					return metav1.ListMeta{}, err
				}
				return l.ListMeta, eachItem(l.Items, each)
			},
			Watch: nodes.Watch,
		},
		WatchList: !watchlist.DoesClientNotSupportWatchListSemantics(cs),
	}
}

// eachItem calls each with every item of a list, in order.
func eachItem[T any, P interface {
	*T
	runtime.Object
}](items []T, each func(runtime.Object) error) error {
	for i := range items {
		if err := each(P(&items[i])); err != nil {
			return err
		}
	}
	return nil
}
