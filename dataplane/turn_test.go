package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTurnKeepsReaderAndSyncApart(t *testing.T) {
	tn := newTurn()
	ctx := context.Background()
	if err := tn.take(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader waiting while a sync holds the turn gives up when the sync
	// stops the read.
	readCtx, stop := context.WithCancel(ctx)
	ran := false
	done := make(chan error)
	go func() { done <- tn.run(readCtx, func() error { ran = true; return nil }) }()
	select {
	case err := <-done:
		t.Fatalf("the reader ran beside the sync: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("run = %v, ran %v; want context.Canceled, not run", err, ran)
	}
	tn.give()
	// Given back, the turn serves the next.
	if err := tn.run(ctx, func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("run = %v, ran %v", err, ran)
	}
	// No turn: at once.
	var none turn
	if err := none.run(ctx, func() error { return errors.ErrUnsupported }); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("nil turn's run = %v", err)
	}
}
