package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// sinkFunc is a Sink made of a function.
type sinkFunc func(e *eventsv1.Event) error

func (f sinkFunc) Create(_ context.Context, e *eventsv1.Event) error { return f(e) }

// Events carry kube-proxy's fields: the regarded object (a Node's in the
// default namespace), type, reason, action and note, from ipvsplane on
// this node.
func TestAPIRecorder(t *testing.T) {
	var posted []*eventsv1.Event
	// The recorder posts from one goroutine, and Close waits for it.
	sink := sinkFunc(func(e *eventsv1.Event) error { posted = append(posted, e); return nil })
	now := time.Unix(1e9, 0)
	r := NewAPIRecorder(sink, zap.NewNop(), "node-a", func() time.Time { return now })
	r.Eventf(NodeRef("node-a"), v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
	r.Eventf(ServiceRef("demo", "web"), v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen",
		"node %s failed to start healthcheck %q on port %d: %v", "node-a", "demo/web", 32000, errors.New("address in use"))
	r.Eventf(NodeRef("node-a"), v1.EventTypeWarning, "Long", "StartKubeProxy", strings.Repeat("x", 2000))
	r.Close(time.Minute)
	if len(posted) != 3 {
		t.Fatalf("%d events, want 3", len(posted))
	}
	start, hc, long := posted[0], posted[1], posted[2]
	if start.Namespace != "default" || start.Regarding.Kind != "Node" || start.Regarding.Name != "node-a" || start.Type != "Normal" ||
		start.Action != "StartKubeProxy" || start.ReportingController != "ipvsplane" || start.ReportingInstance != "ipvsplane-node-a" ||
		!start.EventTime.Time.Equal(now) || !strings.HasPrefix(start.Name, "node-a.") {
		t.Errorf("start event: %+v", start)
	}
	if hc.Namespace != "demo" || hc.Regarding.Kind != "Service" || hc.Type != "Warning" ||
		hc.Note != `node node-a failed to start healthcheck "demo/web" on port 32000: address in use` {
		t.Errorf("health-check event: %+v", hc)
	}
	if len(long.Note) != maxEventNote {
		t.Errorf("a long note is %d bytes, want it cut to %d", len(long.Note), maxEventNote)
	}
}

// apiServer keeps the Events posted to it by name, as the API server
// does, refusing a second of one name.
type apiServer struct {
	mu      sync.Mutex
	events  map[string]*eventsv1.Event
	creates int
}

func (s *apiServer) Create(_ context.Context, e *eventsv1.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates++
	if s.events[e.Namespace+"/"+e.Name] != nil {
		return apierrors.NewAlreadyExists(eventsv1.Resource("events"), e.Name)
	}
	s.events[e.Namespace+"/"+e.Name] = e
	return nil
}

// A problem of a tenant's object that every node reads alike, posted by
// 100 nodes for 600 versions of the object over ten minutes, is one
// Event per SharedWindow, and each node posts it once per window.
func TestSharedEvents(t *testing.T) {
	server := &apiServer{events: map[string]*eventsv1.Event{}}
	now := time.Unix(1e9, 0).Truncate(SharedWindow)
	var nodes []*APIRecorder
	for i := range 100 {
		nodes = append(nodes, NewAPIRecorder(server, zap.NewNop(), fmt.Sprintf("node-%d", i), func() time.Time { return now }))
	}
	ref := v1.ObjectReference{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice", Namespace: "tenant", Name: "web-1"}
	for version := range 600 {
		for _, n := range nodes {
			n.Shared("EndpointSlice/tenant/web-1/InvalidEntryIgnored", ref, v1.EventTypeWarning, "InvalidEntryIgnored", "ReadObject",
				fmt.Sprintf("field endpoints[0].addresses[0]: 224.0.0.%d is not a unicast address", version%200))
		}
		now = now.Add(time.Second)
	}
	for _, n := range nodes {
		n.Close(time.Minute)
	}
	if len(server.events) != 2 || server.creates != 2*len(nodes) {
		t.Errorf("%d Events from %d posts, want 2 from %d (one per window, each node once)", len(server.events), server.creates, 2*len(nodes))
	}
}

// Dropped Events are logged together, not one line each.
func TestDroppedEventsLoggedTogether(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	block := make(chan struct{})
	sink := sinkFunc(func(*eventsv1.Event) error { <-block; return nil })
	now := time.Unix(1e9, 0)
	r := NewAPIRecorder(sink, zap.New(core), "node-a", func() time.Time { return now })
	for i := range 10000 {
		r.Eventf(ServiceRef("demo", fmt.Sprintf("web-%d", i)), v1.EventTypeWarning, "Flood", "Test", "")
	}
	close(block)
	r.Close(time.Minute)
	if n := logs.FilterMessage("events dropped: too many queued").Len(); n != 2 {
		t.Errorf("%d log lines about dropped Events, want 2 (the first drop, and the rest at Close)", n)
	}
}
