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

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
			List:  listEach(svcs.List, func(l *v1.ServiceList) (metav1.ListMeta, []v1.Service) { return l.ListMeta, l.Items }),
			Watch: svcs.Watch,
		},
		EndpointSlices: watcher.ListWatch{
			List: listEach(slices.List, func(l *discoveryv1.EndpointSliceList) (metav1.ListMeta, []discoveryv1.EndpointSlice) {
				return l.ListMeta, l.Items
			}),
			Watch: slices.Watch,
		},
		Nodes: watcher.ListWatch{
			List:  listEach(nodes.List, func(l *v1.NodeList) (metav1.ListMeta, []v1.Node) { return l.ListMeta, l.Items }),
			Watch: nodes.Watch,
		},
		WatchList: !watchlist.DoesClientNotSupportWatchListSemantics(cs),
	}
}

// listEach turns a typed client's List into a [watcher.ListWatch] List:
// the list, decoded whole, then each of its items (split out by parts)
// handed on in order.
func listEach[L any, T any, P interface {
	*T
	runtime.Object
}](list func(context.Context, metav1.ListOptions) (L, error), parts func(L) (metav1.ListMeta, []T)) func(context.Context, metav1.ListOptions, func(runtime.Object) error) (metav1.ListMeta, error) {
	return func(ctx context.Context, o metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
		l, err := list(ctx, o)
		if err != nil {
			return metav1.ListMeta{}, err
		}
		meta, items := parts(l)
		for i := range items {
			if err := each(P(&items[i])); err != nil {
				return meta, err
			}
		}
		return meta, nil
	}
}
