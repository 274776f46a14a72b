// Package httpserver makes the daemon's HTTP servers (the health-check
// node ports, /healthz, /metrics) with bounds on what a client may cost:
// anyone who reaches a node's address reaches them, so a client that
// sends slowly, sends large headers, idles or opens connection after
// connection must not hold the daemon's memory or descriptors.
package httpserver

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// The bounds of every server. The write timeout leaves room for
// pprof's default 30-second CPU profile (with --profiling), which
// refuses a duration past it.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 2 * time.Minute
	// MaxHeaderBytes is room for a scraper's bearer token; a load
	// balancer's probe sends a few hundred bytes.
	MaxHeaderBytes = 16 << 10
	// MaxConnections is the most connections one listener holds open;
	// more wait in the kernel's accept queue.
	MaxConnections = 128
)

// New returns a server of h with the bounds above.
func New(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// Limit returns ln holding at most max connections open at once: Accept
// waits for one to close before it takes the next.
func Limit(ln net.Listener, max int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when closed, once however often it is
// closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
