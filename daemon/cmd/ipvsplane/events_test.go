package main

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// fakeEventSink keeps the Events it is given.
type fakeEventSink struct {
	mu     sync.Mutex
	events []*eventsv1.Event
	fail   error
}

func (s *fakeEventSink) Create(_ context.Context, e *eventsv1.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return s.fail
}

func (s *fakeEventSink) reasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		out = append(out, e.Reason)
	}
	return out
}

// Events carry kube-proxy's fields: the regarded object (a Node's in the
// default namespace), type, reason, action and note, from ipvsplane on
// this node.
func TestAPIRecorder(t *testing.T) {
	sink := &fakeEventSink{}
	now := time.Unix(1e9, 0)
	r := newAPIRecorder(sink, zap.NewNop(), "node-a", func() time.Time { return now })
	r.Eventf(nodeRef("node-a"), v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
	r.Eventf(serviceRef("demo", "web"), v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Listen",
		"node %s failed to start healthcheck %q on port %d: %v", "node-a", "demo/web", 32000, errors.New("address in use"))
	r.Eventf(nodeRef("node-a"), v1.EventTypeWarning, "Long", "StartKubeProxy", strings.Repeat("x", 2000))
	r.close(time.Minute)
	if len(sink.events) != 3 {
		t.Fatalf("%d events, want 3", len(sink.events))
	}
	start, hc, long := sink.events[0], sink.events[1], sink.events[2]
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

// A health-check node port that cannot open is recorded once on its
// Service, not at every retry.
func TestHealthCheckPortEvent(t *testing.T) {
	sink := &fakeEventSink{}
	r := newAPIRecorder(sink, zap.NewNop(), "node-a", time.Now)
	h := newHCServers(zap.NewNop(), "node-a", func() bool { return true })
	h.events = r
	h.listen = func(netip.AddrPort) (net.Listener, error) { return nil, errors.New("address already in use") }
	h.setAddresses([]netip.Addr{netip.IPv4Unspecified()})
	ports := []model.ServicePort{{
		Name: model.ServicePortName{Namespace: "demo", Name: "lb"}, Protocol: model.TCP, Port: 80,
		ClusterIPs:     []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		ExternalPolicy: model.PolicyLocal, HealthCheckNodePort: 32000,
	}}
	h.replace(ports)
	h.replace(ports)
	r.close(time.Minute)
	if got := sink.reasons(); len(got) != 1 || got[0] != "FailedToStartServiceHealthcheck" {
		t.Errorf("events %v, want one FailedToStartServiceHealthcheck", got)
	}
}
