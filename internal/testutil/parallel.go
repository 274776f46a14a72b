package testutil

import (
	"context"
	"sync"
)

// Parallel runs fn for each i from `from` to `to`-1 on `workers` goroutines and
// returns the first error; after an error it starts no more. Tests use it
// to create thousands of API objects, where each request waits mostly on
// the network.
func Parallel(ctx context.Context, workers, from, to int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := from; i < to && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
