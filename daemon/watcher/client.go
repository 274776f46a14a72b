package watcher

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
// client's List and Watch do, except that List hands over the objects
// one at a time: a client that decodes them one at a time never holds
// the whole listing.
type ListWatch struct {
	// List lists the objects opts select, calling each with every one in
	// turn; an error from each ends the listing and is returned. It
	// returns the list's metadata: its resource version and, for a page
	// of a longer list, where to continue.
	List  func(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error)
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
	codecs := serializer.NewCodecFactory(scheme)
	c.NegotiatedSerializer = codecs.WithoutConversion()
	decoder := codecs.UniversalDeserializer()
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
		Services: restListWatch(core, "services", decoder,
			func() protoObject { return &v1.Service{} }, func() runtime.Object { return &v1.ServiceList{} }),
		EndpointSlices: restListWatch(discovery, "endpointslices", decoder,
			func() protoObject { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
		Nodes: restListWatch(core, "nodes", decoder,
			func() protoObject { return &v1.Node{} }, func() runtime.Object { return &v1.NodeList{} }),
		WatchList: true,
	}, nil
}

// restListWatch lists and watches resource in all namespaces as a typed
// client does. A list in protobuf is decoded one item at a time (into
// newItem's objects); one in another encoding is decoded whole by
// decoder into newList's.
func restListWatch(c *rest.RESTClient, resource string, decoder runtime.Decoder, newItem func() protoObject, newList func() runtime.Object) ListWatch {
	request := func(opts *metav1.ListOptions) *rest.Request {
		var timeout time.Duration
		if opts.TimeoutSeconds != nil {
			timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
		}
		return c.Get().UseProtobufAsDefault().Resource(resource).
			VersionedParams(opts, metav1.ParameterCodec).Timeout(timeout)
	}
	return ListWatch{
		List: func(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object) error) (metav1.ListMeta, error) {
			body, err := request(&opts).Stream(ctx)
			if err != nil {
				return metav1.ListMeta{}, err
			}
			defer body.Close()
			r := bufio.NewReaderSize(body, 64<<10)
			if magic, err := r.Peek(len(protobufMagic)); err == nil && bytes.Equal(magic, protobufMagic) {
				_, _ = r.Discard(len(protobufMagic))
				return eachProtobufItem(r, newItem, each)
			}
			data, err := io.ReadAll(r)
			if err != nil {
				return metav1.ListMeta{}, err
			}
			list, _, err := decoder.Decode(data, nil, newList())
			if err != nil {
				return metav1.ListMeta{}, fmt.Errorf("watcher: listing %s: %w", resource, err)
			}
			return eachListItem(list, each)
		},
		Watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return request(&opts).Watch(ctx)
		},
	}
}

// eachListItem calls each with every item of a decoded list and returns
// the list's metadata.
func eachListItem(list runtime.Object, each func(runtime.Object) error) (metav1.ListMeta, error) {
	m, err := meta.ListAccessor(list)
	if err != nil {
		return metav1.ListMeta{}, fmt.Errorf("watcher: %w", err)
	}
	lm := metav1.ListMeta{ResourceVersion: m.GetResourceVersion(), Continue: m.GetContinue(), RemainingItemCount: m.GetRemainingItemCount()}
	return lm, meta.EachListItem(list, each)
}
