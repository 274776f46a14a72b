package watcher

import (
	"testing"
	"time"
)

// poll reports whether cond became true within a generous deadline; it is
// a wait for asynchronous delivery, not a timing check.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("%s: not reached", what)
	}
}

func TestTriggerTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		annotation string
		want       time.Time
	}{
		{"2026-01-01T12:00:05Z", start.Add(5 * time.Second)},
		{"2026-01-01T12:00:05.25Z", start.Add(5250 * time.Millisecond)},
		{"2026-01-01T11:59:00Z", time.Time{}}, // before the watch began
		{"yesterday", time.Time{}},
		{"", time.Time{}},
	}
	for _, tt := range tests {
		s := endpointSlice("web-1")
		s.Annotations = map[string]string{AnnotationTriggerTime: tt.annotation}
		if got := triggerTime(s, start); !got.Equal(tt.want) {
			t.Errorf("triggerTime(%q) = %v, want %v", tt.annotation, got, tt.want)
		}
	}
}
