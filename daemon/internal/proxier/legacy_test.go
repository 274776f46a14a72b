package proxier

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// kube-proxy's iptables-legacy chains are removed after a full sync that
// put ipvsplane's rules in place, not after one whose operations failed
// (but for an endpoint the kernel refuses, which fails alone);
// a failure is tried again, a success is not repeated.
func TestDaemonRemovesLegacyLeftovers(t *testing.T) {
	newDaemon := func(k *fakeKernel, results ...error) (*Proxier, *int) {
		m := metrics.New()
		calls := new(int)
		d := &Proxier{log: zap.NewNop(), dataplane: k, metrics: m, health: testHealth(30*time.Second, time.Now, m),
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

	// An endpoint the kernel refuses (a subnet's broadcast address) fails
	// its own real server only: the sync succeeds and the leftovers go.
	refused := &dataplane.OpError{Op: plan.AddReals{Virtual: plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: inet.TCP},
		Reals: plan.Reals{{RealKey: plan.RealKey{Addr: netip.MustParseAddr("10.244.1.255"), Port: 8080}, Weight: 1}}}, Err: fmt.Errorf("ipvs: create destination: %w", unix.EINVAL)}
	d, calls = newDaemon(&fakeKernel{problems: []error{refused}}, nil)
	if err := d.sync(context.Background()); err != nil || *calls != 1 {
		t.Errorf("after a full sync whose only failure was a refused endpoint: error %v, %d removals", err, *calls)
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
