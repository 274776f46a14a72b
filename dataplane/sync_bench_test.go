package dataplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
)

// What a sync costs the daemon under churn at 10,000 services x 3
// endpoints, the churn soak's shape, on the fakes (so without the
// kernel's part): a sync of one changed service port, and the syncs that
// merge a finished periodic reread and compare everything, a piece each.
// Every change that arrives while one of those runs waits for it, so the
// slowest of them against a one-change sync bounds the churn's tail.
func BenchmarkSyncUnderChurn(b *testing.B) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	read := make(chan struct{}, 1)
	d, _ := newFakeDataplane(b, &dataplane.Config{ResyncInterval: 30 * time.Second, Now: func() time.Time { return now },
		KernelRead: func() { read <- struct{}{} }})
	services := fixture.Cluster(10000, 3)
	if res, err := d.Sync(ctx, &model.State{Node: fixture.ClusterNode(), Services: services}); err != nil || len(res.Errors) > 0 {
		b.Fatal(err, res.Errors)
	}
	next := 0
	change := func(b *testing.B) *dataplane.Result {
		i := next % len(services)
		next++
		p := services[i]
		p.Endpoints = append([]model.Endpoint(nil), p.Endpoints...)
		p.Endpoints[0].Port++
		services[i] = p
		res, err := d.SyncChanges(ctx, []plan.Change{{Name: p.Name, Port: &services[i]}})
		if err != nil || len(res.Errors) > 0 {
			b.Fatal(err, res.Errors)
		}
		return res
	}
	b.Run("one-change", func(b *testing.B) {
		for b.Loop() {
			change(b)
		}
	})
	// The syncs from the one that merges the reread to the one that ends
	// its compare, each with a change; the slowest is reported.
	b.Run("merging-reread", func(b *testing.B) {
		var slowest time.Duration
		for b.Loop() {
			b.StopTimer()
			now = now.Add(time.Minute)
			change(b) // starts the reread
			<-read
			b.StartTimer()
			for {
				start := time.Now()
				res := change(b)
				slowest = max(slowest, time.Since(start))
				if res.Full {
					break
				}
				if !res.Sweeping {
					b.Fatal("a sync after the merge neither compared everything nor went on sweeping")
				}
			}
		}
		b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-sync-ms")
	})
}
