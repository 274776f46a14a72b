package dataplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/ipvs"
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
	d, n := newFakeDataplane(b, &dataplane.Config{ResyncInterval: 30 * time.Second, Now: func() time.Time { return now },
		KernelRead: func() { read <- struct{}{} }})
	services := fixture.Cluster(10000, 3)
	if res, err := d.Sync(ctx, &model.State{Node: fixture.ClusterNode(), Services: services}); err != nil || len(res.Errors) > 0 {
		b.Fatal(err, res.Errors)
	}
	next := 0
	// changeAmong changes one of the first n services and syncs it.
	changeAmong := func(b *testing.B, ctx context.Context, n int) *dataplane.Result {
		i := next % n
		next++
		p := services[i]
		p.Endpoints = append([]model.Endpoint(nil), p.Endpoints...)
		p.Endpoints[0].Port++
		services[i] = p
		res, err := d.SyncChanges(ctx, []model.Change{{Name: p.Name, Port: &services[i]}})
		if err != nil || len(res.Errors) > 0 {
			b.Fatal(err, res.Errors)
		}
		return res
	}
	change := func(b *testing.B) *dataplane.Result { return changeAmong(b, ctx, len(services)) }
	b.Run("one-change", func(b *testing.B) {
		for b.Loop() {
			change(b)
		}
	})
	// The same with 100 virtual servers draining a real server that
	// still has a connection, as in a rolling update under traffic, a
	// change every 20 ms (50 a second); reads-per-sync counts the dumps
	// of virtual servers' real servers a sync makes, one of them the
	// changed one's.
	b.Run("one-change-100-draining", func(b *testing.B) {
		drainWithConnections(b, d, n, services[len(services)-100:])
		var reads int
		count := fault.With(ctx, func(pkg, req string) error {
			if pkg == "ipvs" && req == "get destination" {
				reads++
			}
			return nil
		})
		for b.Loop() {
			now = now.Add(20 * time.Millisecond)
			changeAmong(b, count, len(services)-100)
		}
		b.ReportMetric(float64(reads)/float64(b.N), "reads-per-sync")
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

// drainWithConnections gives each service's first endpoint a connection
// and removes it, so that it drains.
func drainWithConnections(b *testing.B, d *dataplane.Dataplane, n *dataplanetest.Node, services []model.ServicePort) {
	b.Helper()
	changes := make([]model.Change, len(services))
	for i := range services {
		p := &services[i]
		ep := p.Endpoints[0]
		vs := ipvs.Service{Family: inet.IPv4, Protocol: p.Protocol, Addr: p.ClusterIPs[0], Port: p.Port}
		if err := n.IPVS.SetConnections(vs, ep.Addr, ep.Port, 1, 0); err != nil {
			b.Fatal(err)
		}
		p.Endpoints = p.Endpoints[1:]
		changes[i] = model.Change{Name: p.Name, Port: p}
	}
	if res, err := d.SyncChanges(context.Background(), changes); err != nil || len(res.Errors) > 0 {
		b.Fatal(err, res.Errors)
	}
}
