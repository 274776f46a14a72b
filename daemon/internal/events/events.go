// Package events records Kubernetes Events about the objects ipvsplane
// serves, as kube-proxy's recorder does: through the API server
// (NewAPIRecorder on a Sink such as NewRESTSink) or, without one, to the
// log (LogRecorder).
package events

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Recorder records Kubernetes Events about objects, as kube-proxy's
// recorder does: the daemon's parts report what an operator should see
// on the object (a health-check port that cannot open on its Service, the
// start on the Node). It never blocks.
type Recorder interface {
	Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any)
	// Shared records an Event that every node records alike, about a
	// tenant's object every node reads the same (a bad field, a
	// conflict): the Events of one key are one Event in the cluster per
	// SharedWindow, whichever node posts it first, and a node posts a
	// key at most once per window. key names the object and what is
	// wrong with it (not the node).
	Shared(key string, regarding v1.ObjectReference, eventType, reason, action, note string)
}

// SharedWindow is how long the Events of one key (see Recorder.Shared)
// are one Event: a tenant who rewrites an object with bad entries every
// second gets one Event per object and reason per window from the
// cluster, where every node posted one per version. kube-proxy records
// no such Event; client-go's spam filter lets one per object through
// every five minutes, too.
const SharedWindow = 5 * time.Minute

// Sink creates Events in the API server.
type Sink interface {
	Create(ctx context.Context, e *eventsv1.Event) error
}

// The reporting controller of ipvsplane's Events.
const eventController = "ipvsplane"

// maxEventNote is the API server's limit on an Event's note.
const maxEventNote = 1024

// NodeRef refers to this node's Node, which kube-proxy's node-wide
// Events regard.
func NodeRef(name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name}
}

// ServiceRef refers to a Service.
func ServiceRef(namespace, name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: namespace, Name: name}
}

// APIRecorder posts Events through a sink in the background; Events that
// come faster than the API server takes them are dropped, and the drops
// logged at most once per dropLogEvery.
type APIRecorder struct {
	sink     Sink
	log      *zap.Logger
	instance string
	now      func() time.Time
	queue    chan *eventsv1.Event
	done     chan struct{}

	mu sync.Mutex
	// window is the SharedWindow the keys of shared were posted in.
	window int64
	shared map[string]bool
	// dropped counts the Events dropped since the last log of drops, at
	// lastDropLog.
	dropped     int
	lastDropLog time.Time
}

// dropLogEvery bounds how often dropped Events are logged: a flood of
// them logged one line each.
const dropLogEvery = time.Minute

// NewAPIRecorder starts a recorder; instance names this ipvsplane (the
// node's name). Close it to post what is queued.
func NewAPIRecorder(sink Sink, log *zap.Logger, instance string, now func() time.Time) *APIRecorder {
	r := &APIRecorder{sink: sink, log: log, instance: eventController + "-" + instance, now: now,
		queue: make(chan *eventsv1.Event, 64), done: make(chan struct{}), shared: map[string]bool{}}
	go r.post()
	return r
}

// Eventf queues an Event; it drops it when the queue is full.
func (r *APIRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any) {
	now := r.now()
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	r.enqueue(r.event(now, regarding.Name+"."+strconv.FormatInt(now.UnixNano(), 16), regarding, eventType, reason, action, note))
}

// Shared queues an Event named by its key and window, so that the other
// nodes' posts of it are refused as existing; a key already posted in
// this window is not posted again.
func (r *APIRecorder) Shared(key string, regarding v1.ObjectReference, eventType, reason, action, note string) {
	now := r.now()
	window := now.UnixNano() / int64(SharedWindow)
	r.mu.Lock()
	if window != r.window {
		r.window, r.shared = window, map[string]bool{}
	}
	posted := r.shared[key]
	r.shared[key] = true
	r.mu.Unlock()
	if posted {
		return
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", key, window)
	r.enqueue(r.event(now, regarding.Name+"."+strconv.FormatUint(h.Sum64(), 16), regarding, eventType, reason, action, note))
}

// event makes an Event of the given name.
func (r *APIRecorder) event(now time.Time, name string, regarding v1.ObjectReference, eventType, reason, action, note string) *eventsv1.Event {
	ns := regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote], "")
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:  metav1.NewMicroTime(now), ReportingController: eventController, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: regarding, Note: note, Type: eventType,
	}
}

// enqueue queues e, or drops it when the queue is full.
func (r *APIRecorder) enqueue(e *eventsv1.Event) {
	select {
	case r.queue <- e:
	default:
		r.countDrop(e)
	}
}

// countDrop counts a dropped Event, and logs the drops when the last log
// of them is dropLogEvery old.
func (r *APIRecorder) countDrop(e *eventsv1.Event) {
	now := r.now()
	r.mu.Lock()
	r.dropped++
	n := r.dropped
	if now.Sub(r.lastDropLog) < dropLogEvery {
		r.mu.Unlock()
		return
	}
	r.dropped, r.lastDropLog = 0, now
	r.mu.Unlock()
	r.log.Warn("events dropped: too many queued", zap.Int("count", n), zap.String("lastReason", e.Reason), zap.String("lastObject", e.Regarding.Name))
}

func (r *APIRecorder) post() {
	defer close(r.done)
	for e := range r.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// A shared Event another node posted first exists already.
		if err := r.sink.Create(ctx, e); err != nil && !apierrors.IsAlreadyExists(err) {
			r.log.Warn("cannot record an event", zap.String("reason", e.Reason), zap.String("object", e.Regarding.Name), zap.Error(err))
		}
		cancel()
	}
}

// Close posts the queued Events, waiting at most wait, and logs the
// drops not logged yet.
func (r *APIRecorder) Close(wait time.Duration) {
	close(r.queue)
	select {
	case <-r.done:
	case <-time.After(wait):
	}
	r.mu.Lock()
	n := r.dropped
	r.mu.Unlock()
	if n > 0 {
		r.log.Warn("events dropped: too many queued", zap.Int("count", n))
	}
}

// LogRecorder logs Events where there is no API server to record them
// (manifests from files).
type LogRecorder struct{ Log *zap.Logger }

// Eventf logs the Event.
func (r LogRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	r.log(regarding, eventType, reason, action, note)
}

// Shared logs the Event: with manifests from files there are no other
// nodes to share it with.
func (r LogRecorder) Shared(_ string, regarding v1.ObjectReference, eventType, reason, action, note string) {
	r.log(regarding, eventType, reason, action, note)
}

func (r LogRecorder) log(regarding v1.ObjectReference, eventType, reason, action, note string) {
	r.Log.Info("event", zap.String("type", eventType), zap.String("reason", reason), zap.String("action", action),
		zap.String("object", regarding.Kind+" "+regarding.Namespace+"/"+regarding.Name), zap.String("note", note))
}

// restSink creates Events through events.k8s.io/v1 with a client
// that knows that group only.
type restSink struct{ client *rest.RESTClient }

// NewRESTSink returns a Sink that creates Events through events.k8s.io/v1
// with the API server of cfg.
func NewRESTSink(cfg *rest.Config) (Sink, error) {
	scheme := runtime.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &eventsv1.SchemeGroupVersion, "/apis"
	c.ContentType, c.AcceptContentTypes = "application/json", "application/json"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &restSink{client: client}, nil
}

// Create posts e.
func (s *restSink) Create(ctx context.Context, e *eventsv1.Event) error {
	return s.client.Post().Namespace(e.Namespace).Resource("events").Body(e).Do(ctx).Error()
}
