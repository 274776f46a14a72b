package proxier

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/legacyiptables"
	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"golang.org/x/sys/unix"
)

// kube-proxy's iptables-legacy chains are removed after a full sync that
// put ipvsplane's rules in place, not after one whose operations failed
// (but for an endpoint the kernel refuses, which fails alone);
// a failure is tried again, a success is not repeated.
func TestRemovesLegacyLeftovers(t *testing.T) {
	newProxier := func(s setup, results ...error) (*testProxier, *int) {
		calls := new(int)
		s.legacy = func(context.Context) (legacyiptables.Report, error) {
			err := results[min(*calls, len(results)-1)]
			*calls++
			return legacyiptables.Report{Removed: []string{"iptables-legacy nat KUBE-SERVICES"}}, err
		}
		p := newTestProxier(t, s)
		p.listed(t, webManifest)
		return p, calls
	}
	// Without the dummy driver the service IP cannot be bound.
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	p, calls := newProxier(setup{withoutDummy: true, now: clock.now}, nil)
	if err := p.Sync(context.Background()); err == nil || *calls != 0 {
		t.Errorf("after a full sync with a failed operation: error %v, %d removals", err, *calls)
	}
	// Its rules in place, the sync counts as one for the metrics.
	if got := gatheredValue(t, p.metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != float64(clock.t.Unix()) {
		t.Errorf("last sync timestamp %v, want %v", got, clock.t.Unix())
	}

	// An endpoint the kernel refuses (a subnet's broadcast address) fails
	// its own real server only: the sync succeeds and the leftovers go.
	refused := &dataplane.OpError{Op: plan.AddReals{Virtual: plan.VirtualKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: inet.TCP},
		Reals: plan.Reals{{RealKey: plan.RealKey{Addr: netip.MustParseAddr("10.244.1.255"), Port: 8080}, Weight: 1}}}, Err: fmt.Errorf("ipvs: create destination: %w", unix.EINVAL)}
	p, calls = newProxier(setup{}, nil)
	p.kernel.extra = []error{refused}
	if err := p.Sync(context.Background()); err != nil || *calls != 1 {
		t.Errorf("after a full sync whose only failure was a refused endpoint: error %v, %d removals", err, *calls)
	}

	p, calls = newProxier(setup{}, errors.New("busy"), nil)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if *calls != 1 || p.legacyDone {
		t.Fatalf("after the first full sync: %d removals, done %v", *calls, p.legacyDone)
	}
	if err := p.Sync(context.Background()); err != nil { // changes only
		t.Fatal(err)
	}
	if *calls != 1 {
		t.Errorf("after a sync of changes: %d removals", *calls)
	}
	for range 2 {
		p.removeLegacyLeftovers(context.Background())
	}
	if *calls != 2 || !p.legacyDone {
		t.Errorf("after a retry that succeeded and another: %d removals, done %v", *calls, p.legacyDone)
	}
}
