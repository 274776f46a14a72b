package proxier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/metrics"
)

// While the start's listing goes on, the daemon prefills what is listed so
// far, then what was listed since, at most once per prefillEvery and no
// sooner than twice the last round's time, and does not count that as a
// sync: the first sync, once everything is listed, is a full one with the
// whole state.
func TestPrefill(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	p := newTestProxier(t, setup{now: clock.now})
	k := p.kernel
	feed(t, p.tracker, webManifest)
	ctx := context.Background()

	p.Sync(ctx)
	p.Sync(ctx)
	if !slices.Equal(k.calls, []string{"prefill"}) || len(k.state.Services) != 1 {
		t.Fatalf("calls %v with %d service ports, want one prefill with web", k.calls, len(k.state.Services))
	}
	if got := p.node.IPVS.Dump(); !strings.Contains(got, "TCP 10.96.0.80:80 rr\n  -> 10.244.1.10:8080 masq 1") {
		t.Errorf("IPVS after the prefill:\n%s", got)
	}
	// The next takes what was listed since.
	clock.advance(prefillEvery)
	feed(t, p.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	p.Sync(ctx)
	if got := gatheredHistogramCount(t, p.metrics, "ipvsplane_prefill_duration_seconds"); !slices.Equal(k.calls, []string{"prefill", "prefill changes"}) || got != 2 {
		t.Errorf("calls %v, %d prefills observed; want the changes prefilled after prefillEvery", k.calls, got)
	}
	if len(k.changes) != 1 || k.changes[0].Port == nil || k.changes[0].Port.Endpoints[0].Addr.String() != "10.244.1.11" {
		t.Errorf("the changes prefilled: %+v", k.changes)
	}
	if got := gatheredValue(t, p.metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != 0 {
		t.Errorf("a prefill set the last sync's time: %v", got)
	}
	// A change of the node's settings prefills everything again.
	clock.advance(prefillEvery)
	feed(t, p.tracker, "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.9}]}\n")
	p.Sync(ctx)
	if !slices.Equal(k.calls, []string{"prefill", "prefill changes", "prefill"}) || len(k.state.Services) != 1 {
		t.Errorf("calls %v with %d service ports; want the whole state prefilled after a node change", k.calls, len(k.state.Services))
	}

	p.listed(t)
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.calls, []string{"prefill", "prefill changes", "prefill", "sync"}) || len(k.state.Services) != 1 || !p.lastFull {
		t.Errorf("calls %v with %d service ports, full %v; want a full sync of the whole state", k.calls, len(k.state.Services), p.lastFull)
	}
	if got := p.hc.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("health-check ports after the first sync: %v", got)
	}
	if got := p.node.IPVS.Dump(); strings.Contains(got, "10.244.1.10:8080") || !strings.Contains(got, "-> 10.244.1.11:8080 masq 1") {
		t.Errorf("IPVS after the first sync:\n%s", got)
	}
}

// gatheredHistogramCount returns how many observations the histogram name
// without labels holds.
func gatheredHistogramCount(t *testing.T, m *metrics.Metrics, name string) uint64 {
	t.Helper()
	for _, mf := range gather(t, m, name) {
		for _, metric := range mf.GetMetric() {
			return metric.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// The daemon's memory settings follow the first programming: Programming
// before each prefill and sync until one sync programmed the kernel,
// Synced after each sync from then on, with whether it compared
// everything.
func TestSyncHooks(t *testing.T) {
	var events []string
	p := newTestProxier(t, setup{
		programming: func() { events = append(events, "programming") },
		synced:      func(full bool) { events = append(events, fmt.Sprint("synced ", full)) },
	})
	feed(t, p.tracker, webManifest)
	ctx := context.Background()
	p.Sync(ctx)
	p.listed(t)
	for range 2 {
		if err := p.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"programming", "programming", "synced true", "synced false"}
	if !slices.Equal(events, want) {
		t.Errorf("hooks %v, want %v", events, want)
	}
}
