package main

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

// eventRecorder records Kubernetes Events about objects, as kube-proxy's
// recorder does: the daemon's parts report what an operator should see
// on the object (a health-check port that cannot open on its Service, the
// start on the Node). It never blocks.
type eventRecorder interface {
	Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any)
}

// eventSink creates Events in the API server.
type eventSink interface {
	Create(ctx context.Context, e *eventsv1.Event) error
}

// The reporting controller of ipvsplane's Events.
const eventController = "ipvsplane"

// maxEventNote is the API server's limit on an Event's note.
const maxEventNote = 1024

// nodeRef refers to this node's Node, which kube-proxy's node-wide
// Events regard.
func nodeRef(name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name}
}

// serviceRef refers to a Service.
func serviceRef(namespace, name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: namespace, Name: name}
}

// apiRecorder posts Events through a sink in the background; Events that
// come faster than the API server takes them are dropped and logged.
type apiRecorder struct {
	sink     eventSink
	log      *zap.Logger
	instance string
	now      func() time.Time
	queue    chan *eventsv1.Event
	done     chan struct{}
}

// newAPIRecorder starts a recorder; instance names this ipvsplane (the
// node's name). Close it to post what is queued.
func newAPIRecorder(sink eventSink, log *zap.Logger, instance string, now func() time.Time) *apiRecorder {
	r := &apiRecorder{sink: sink, log: log, instance: eventController + "-" + instance, now: now,
		queue: make(chan *eventsv1.Event, 64), done: make(chan struct{})}
	go r.post()
	return r
}

func (r *apiRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any) {
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

func (r *apiRecorder) post() {
	defer close(r.done)
	for e := range r.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.sink.Create(ctx, e); err != nil {
			r.log.Warn("cannot record an event", zap.String("reason", e.Reason), zap.String("object", e.Regarding.Name), zap.Error(err))
		}
		cancel()
	}
}

// close posts the queued Events, waiting at most wait.
func (r *apiRecorder) close(wait time.Duration) {
	close(r.queue)
	select {
	case <-r.done:
	case <-time.After(wait):
	}
}

// logRecorder logs Events where there is no API server to record them
// (manifests from files).
type logRecorder struct{ log *zap.Logger }

func (r logRecorder) Eventf(regarding v1.ObjectReference, eventType, reason, action, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	r.log.Info("event", zap.String("type", eventType), zap.String("reason", reason), zap.String("action", action),
		zap.String("object", regarding.Kind+" "+regarding.Namespace+"/"+regarding.Name), zap.String("note", note))
}

// restEventSink creates Events through events.k8s.io/v1 with a client
// that knows that group only.
type restEventSink struct{ client *rest.RESTClient }

func newRESTEventSink(cfg *rest.Config) (*restEventSink, error) {
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
	return &restEventSink{client: client}, nil
}

func (s *restEventSink) Create(ctx context.Context, e *eventsv1.Event) error {
	return s.client.Post().Namespace(e.Namespace).Resource("events").Body(e).Do(ctx).Error()
}
