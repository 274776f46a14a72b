package watcher

import "time"

// limiter is a token bucket: burst tokens, one more every interval. With
// a zero interval it never limits.
type limiter struct {
	interval time.Duration
	burst    float64
	tokens   float64
	last     time.Time
}

func newLimiter(interval time.Duration, burst int, now time.Time) *limiter {
	return &limiter{interval: interval, burst: float64(burst), tokens: float64(burst), last: now}
}

func (l *limiter) refill(now time.Time) {
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = min(l.burst, l.tokens+float64(elapsed)/float64(l.interval))
	}
	l.last = now
}

// take uses a token if there is one.
func (l *limiter) take(now time.Time) bool {
	if l.interval <= 0 {
		return true
	}
	l.refill(now)
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// wait returns how long until a token is there.
func (l *limiter) wait(now time.Time) time.Duration {
	if l.interval <= 0 {
		return 0
	}
	l.refill(now)
	if l.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - l.tokens) * float64(l.interval))
}
