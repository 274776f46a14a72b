package main

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
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

// A health-check node port that cannot open is recorded once on its
// Service, not at every retry.
func TestHealthCheckPortEvent(t *testing.T) {
	sink := &fakeEventSink{}
	r := events.NewAPIRecorder(sink, zap.NewNop(), "node-a", time.Now)
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
	r.Close(time.Minute)
	if got := sink.reasons(); len(got) != 1 || got[0] != "FailedToStartServiceHealthcheck" {
		t.Errorf("events %v, want one FailedToStartServiceHealthcheck", got)
	}
}
