package watcher

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client reaches the API server for [WatchKubernetes]: it lists and
// watches Services, EndpointSlices and Nodes across all namespaces.
// [NewClient] builds one that knows only those kinds; a program that
// already has a client-go clientset can wrap it instead (package
// watcher/clientset).
type Client struct {
	Services, EndpointSlices, Nodes ListWatch
	// WatchList says the API server can stream the initial listing as a
	// watch (sendInitialEvents, client-go's WatchListClient), which lets
	// WatchKubernetes hand each object on as it arrives instead of
	// holding the whole listing; without it the objects are listed.
	WatchList bool
}

// ListWatch lists and watches one kind of object, as a client-go typed
// client's List and Watch do.
type ListWatch struct {
	List  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	Watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewClient returns a client for the API server cfg names. It speaks
// core/v1 and discovery.k8s.io/v1 only: the full clientset would link
// and register every API group, megabytes of code and memory the daemon
// never uses. cfg's ContentType, AcceptContentTypes, QPS, Burst and
// UserAgent apply as in a clientset; without a ContentType it prefers
// protobuf, as client-go's typed clients do.
func NewClient(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("watcher: %w", err)
		}
	}
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	// One connection pool and one rate limit for both groups, as a
	// clientset shares them.
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("watcher: a QPS limit of %v needs a burst above 0", c.QPS)
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		gc := *c
		gc.GroupVersion, gc.APIPath = &gv, apiPath
		return rest.RESTClientForConfigAndClient(&gc, httpClient)
	}
	core, err := group(v1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	discovery, err := group(discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	return &Client{
		Services:       restListWatch(core, "services", func() runtime.Object { return &v1.ServiceList{} }),
		EndpointSlices: restListWatch(discovery, "endpointslices", func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
		Nodes:          restListWatch(core, "nodes", func() runtime.Object { return &v1.NodeList{} }),
		WatchList:      true,
	}, nil
}

// restListWatch lists and watches resource in all namespaces as a typed
// client does; newList returns an empty list to decode into.
func restListWatch(c *rest.RESTClient, resource string, newList func() runtime.Object) ListWatch {
	request := func(opts *metav1.ListOptions) *rest.Request {
		var timeout time.Duration
		if opts.TimeoutSeconds != nil {
			timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
		}
		return c.Get().UseProtobufAsDefault().Resource(resource).
			VersionedParams(opts, metav1.ParameterCodec).Timeout(timeout)
	}
	return ListWatch{
		List: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			if err := request(&opts).Do(ctx).Into(list); err != nil {
				return nil, err
			}
			return list, nil
		},
		Watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return request(&opts).Watch(ctx)
		},
	}
}
