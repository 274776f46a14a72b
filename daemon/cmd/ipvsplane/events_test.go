package main

import (
	"context"
	"sync"

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
