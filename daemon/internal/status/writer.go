package status

import (
	"context"
	"sync"
)

// Writer writes the state file and the names file in the background, the
// latest record only: a sync hands its record over and goes on. Encoding
// the names of every service port (at 10,000 services, 0.2 s under
// emulation, once in 5 s under churn) held up the sync after it, and with
// it every change waiting for that sync.
type Writer struct {
	path    string
	onError func(error)

	// writing keeps writes in the order their records came.
	writing sync.Mutex
	mu      sync.Mutex
	// rec is the latest record not yet written, nil if none; its
	// Services, when not nil, go to the names file too.
	rec  *Record
	wake chan struct{}
}

// NewWriter returns a writer of the state file at path, which reports a
// failed write to onError.
func NewWriter(path string, onError func(error)) *Writer {
	return &Writer{path: path, onError: onError, wake: make(chan struct{}, 1)}
}

// Put hands r over to be written, with its Services when they are not
// nil; the writer owns them from then on. A record still waiting is
// replaced, and the names it carried are kept when r has none.
func (w *Writer) Put(r Record) {
	w.mu.Lock()
	if r.Services == nil && w.rec != nil {
		r.Services = w.rec.Services
	}
	w.rec = &r
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start writes the records as they come until ctx is done or the returned
// function is called, which writes the last one still waiting and
// returns once it is written.
func (w *Writer) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				w.Flush()
				return
			case <-w.wake:
				w.Flush()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Flush writes the record waiting, if any, and returns once it is
// written or its write failed.
func (w *Writer) Flush() {
	w.writing.Lock()
	defer w.writing.Unlock()
	w.mu.Lock()
	r := w.rec
	w.rec = nil
	w.mu.Unlock()
	if r == nil {
		return
	}
	if err := WriteRecord(w.path, r, r.Services != nil); err != nil {
		w.onError(err)
	}
}
