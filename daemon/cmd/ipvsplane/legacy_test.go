package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"go.uber.org/zap"
)

// kube-proxy's iptables-legacy chains are removed after a full sync that
// put ipvsplane's rules in place, not after one whose operations failed;
// a failure is tried again, a success is not repeated.
func TestDaemonRemovesLegacyLeftovers(t *testing.T) {
	newDaemon := func(k *fakeKernel, results ...error) (*daemon, *int) {
		m := metrics.New()
		calls := new(int)
		d := &daemon{log: zap.NewNop(), kernel: k, metrics: m, health: testHealth(30*time.Second, time.Now, m),
			events: &reasonRecorder{}, now: time.Now, tracker: watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})}
		d.hc = testServiceServers("node-a", nil)
		t.Cleanup(func() { d.hc.Close(context.Background()) })
		d.legacy = func(context.Context) (legacyiptables.Report, error) {
			err := results[min(*calls, len(results)-1)]
			*calls++
			return legacyiptables.Report{Removed: []string{"iptables-legacy nat KUBE-SERVICES"}}, err
		}
		return d, calls
	}
	d, calls := newDaemon(&fakeKernel{fail: errors.New("bind failed")}, nil)
	_ = d.sync(context.Background())
	if *calls != 0 {
		t.Errorf("after a full sync with a failed operation: %d removals", *calls)
	}

	d, calls = newDaemon(&fakeKernel{}, errors.New("busy"), nil)
	if err := d.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if *calls != 1 || d.legacyDone {
		t.Fatalf("after the first full sync: %d removals, done %v", *calls, d.legacyDone)
	}
	if err := d.sync(context.Background()); err != nil { // changes only
		t.Fatal(err)
	}
	if *calls != 1 {
		t.Errorf("after a sync of changes: %d removals", *calls)
	}
	for range 2 {
		d.removeLegacyLeftovers(context.Background())
	}
	if *calls != 2 || !d.legacyDone {
		t.Errorf("after a retry that succeeded and another: %d removals, done %v", *calls, d.legacyDone)
	}
}
