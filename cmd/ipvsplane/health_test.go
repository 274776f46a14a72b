package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestHealth(t *testing.T) {
	const period = 30 * time.Second
	tests := []struct {
		name  string
		steps func(h *health, c *fakeClock)
		want  bool
	}{
		{"starting", func(h *health, c *fakeClock) { c.advance(period) }, true},
		{"no first sync", func(h *health, c *fakeClock) { c.advance(2*period + time.Second) }, false},
		{"synced recently", func(h *health, c *fakeClock) { c.advance(3 * period); h.sync(); c.advance(period) }, true},
		{"syncs stalled", func(h *health, c *fakeClock) { h.sync(); c.advance(2*period + time.Second) }, false},
		{"syncing", func(h *health, c *fakeClock) {
			for range 10 {
				c.advance(period)
				h.sync()
			}
			c.advance(2 * period)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1e9, 0)}
			h := newHealth(period, c.now)
			tt.steps(h, c)
			if got := h.check().NodeHealthy; got != tt.want {
				t.Errorf("healthy = %v, want %v", got, tt.want)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			if wantCode := map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[tt.want]; rec.Code != wantCode {
				t.Errorf("/healthz answered %d, want %d: %s", rec.Code, wantCode, rec.Body)
			}
		})
	}
}
