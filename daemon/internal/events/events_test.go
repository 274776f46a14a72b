package events

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
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
