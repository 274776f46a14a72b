// Package events records Kubernetes Events about the objects ipvsplane
// serves, as kube-proxy's recorder does: through the API server
// (NewAPIRecorder on a Sink such as NewRESTSink) or, without one, to the
// log (LogRecorder).
package events

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
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
}

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
// come faster than the API server takes them are dropped and logged.
type APIRecorder struct {
	sink     Sink
	log      *zap.Logger
	instance string
	now      func() time.Time
	queue    chan *eventsv1.Event
	done     chan struct{}
}

// NewAPIRecorder starts a recorder; instance names this ipvsplane (the
// node's name). Close it to post what is queued.
func NewAPIRecorder(sink Sink, log *zap.Logger, instance string, now func() time.Time) *APIRecorder {
	r := &APIRecorder{sink: sink, log: log, instance: eventController + "-" + instance, now: now,
		queue: make(chan *eventsv1.Event, 64), done: make(chan struct{})}
	go r.post()
	return r
}

// Eventf queues an Event; it drops it, logging, when the queue is full.
func (r *APIRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any) {
	now := r.now()
	ns := regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	if len(note) > maxEventNote {
		note = note[:maxEventNote]
	}
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: regarding.Name + "." + strconv.FormatInt(now.UnixNano(), 16), Namespace: ns},
		EventTime:  metav1.NewMicroTime(now), ReportingController: eventController, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: regarding, Note: note, Type: eventType,
	}
	select {
	case r.queue <- e:
	default:
		r.log.Warn("event dropped: too many queued", zap.String("reason", reason), zap.String("object", regarding.Name))
	}
}

func (r *APIRecorder) post() {
	defer close(r.done)
	for e := range r.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.sink.Create(ctx, e); err != nil {
			r.log.Warn("cannot record an event", zap.String("reason", e.Reason), zap.String("object", e.Regarding.Name), zap.Error(err))
		}
		cancel()
	}
}

// Close posts the queued Events, waiting at most wait.
func (r *APIRecorder) Close(wait time.Duration) {
	close(r.queue)
	select {
	case <-r.done:
	case <-time.After(wait):
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
