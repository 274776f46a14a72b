package testutil

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestParallel(t *testing.T) {
	var sum atomic.Int64
	err := Parallel(context.Background(), 4, 10, 20, func(_ context.Context, i int) error {
		sum.Add(int64(i))
		return nil
	})
	if err != nil || sum.Load() != 145 {
		t.Errorf("sum %d, error %v; want 145, nil", sum.Load(), err)
	}
	boom := errors.New("boom")
	var ran atomic.Int64
	err = Parallel(context.Background(), 2, 0, 1000, func(ctx context.Context, i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return ctx.Err()
	})
	if !errors.Is(err, boom) || ran.Load() == 1000 {
		t.Errorf("error %v after %d calls; want boom, and fewer than 1000", err, ran.Load())
	}
}
