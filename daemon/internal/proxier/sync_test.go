package proxier

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsplane/ipvsplane/daemon/internal/status"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The first sync hands over the whole state, the next ones the changes,
// until the node's settings change; what follows the services (the
// health-check node ports, the metrics) follows them; failed operations
// fail the sync, for the runner to try again.
func TestSync(t *testing.T) {
	var listened []netip.AddrPort
	p := newTestProxier(t, setup{listen: func(a netip.AddrPort) (net.Listener, error) {
		listened = append(listened, a)
		return net.Listen("tcp", "127.0.0.1:0")
	}})
	k := p.kernel
	p.listed(t, webManifest)
	sync := func() {
		t.Helper()
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if len(k.state.Services) != 1 {
		t.Fatalf("first sync: %d service ports", len(k.state.Services))
	}
	if got := p.node.IPVS.Dump(); !strings.Contains(got, "TCP 10.96.0.80:80 rr\n  -> 10.244.1.10:8080 masq 1") {
		t.Errorf("IPVS after the first sync:\n%s", got)
	}
	if got := p.hc.Ports(); len(got) != 1 || got[0] != 32000 {
		t.Errorf("health-check ports: %v", got)
	}
	if want := []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:32000")}; !slices.Equal(listened, want) {
		t.Errorf("health-check port listened on %v, want %v", listened, want)
	}

	// An endpoint change goes through the incremental path, with its
	// trigger time observed.
	feed(t, p.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	sync()
	if len(k.changes) != 1 || k.changes[0].Name.Name != "web" || k.changes[0].Port == nil {
		t.Errorf("changes: %+v", k.changes)
	}
	if got := p.node.IPVS.Dump(); !strings.Contains(got, "-> 10.244.1.11:8080 masq 1") {
		t.Errorf("IPVS after the endpoint change:\n%s", got)
	}
	// An IPv4 slice's change is the IPv4 proxier's, as in kube-proxy.
	if got := seriesFamilies(t, p.metrics, "kubeproxy_network_programming_duration_seconds"); !slices.Equal(got, []string{"IPv4"}) {
		t.Errorf("network programming latency: series of %v, want IPv4's alone", got)
	}
	// A removed service is a change without a port.
	p.tracker.DeleteService("demo", "web")
	sync()
	if len(k.changes) != 1 || k.changes[0].Port != nil {
		t.Errorf("removal: %+v", k.changes)
	}
	if len(p.hc.Ports()) != 0 {
		t.Errorf("health-check ports left: %v", p.hc.Ports())
	}
	// A change of the node's settings hands over the whole state.
	feed(t, p.tracker, "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.9}]}\n")
	sync()
	if got := k.state.Node.NodeIPs; len(got) != 1 || got[0].String() != "192.168.0.9" {
		t.Errorf("node addresses: %v", got)
	}
	if diff := cmp.Diff([]string{"sync", "changes", "changes", "sync"}, k.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// Failed operations make the runner try again.
	p.breakSet(t, "KUBE-CLUSTER-IP")
	feed(t, p.tracker, webManifest)
	if err := p.Sync(context.Background()); err == nil {
		t.Error("a sync with failed operations reported no error")
	}
}

// Each sync is recorded in the state file; the names of the virtual
// servers beside it are written when they change, at most once per
// namesEvery.
func TestStateFile(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	stateFile := filepath.Join(t.TempDir(), "status.json")
	p := newTestProxier(t, setup{now: clock.now, records: status.NewWriter(stateFile, func(err error) { t.Error(err) })})
	p.listed(t, webManifest)
	// Each sync's record is written, as the writer's goroutine would.
	sync := func() {
		t.Helper()
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.records.Flush()
	}
	names := func() map[string]string {
		t.Helper()
		rec, err := status.ReadRecord(stateFile)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Services
	}
	sync()
	rec, err := status.ReadRecord(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := map[string]string{"TCP 10.96.0.80:80": "demo/web:http", "TCP *:30080": "demo/web:http"}
	if diff := cmp.Diff(wantNames, rec.Services); diff != "" || rec.Node != "" || rec.Syncs != 1 || !rec.Full {
		t.Errorf("state file: %+v %s", rec, diff)
	}

	// An endpoint change leaves the names file alone.
	clock.advance(time.Second)
	if err := os.Remove(status.NamesFile(stateFile)); err != nil {
		t.Fatal(err)
	}
	feed(t, p.tracker, strings.Replace(webManifest, "10.244.1.10", "10.244.1.11", 1))
	sync()
	if _, err := os.Stat(status.NamesFile(stateFile)); !os.IsNotExist(err) {
		t.Errorf("an endpoint change rewrote the names file: %v", err)
	}
	clock.advance(namesEvery)
	p.tracker.DeleteService("demo", "web")
	sync()
	if got := names(); len(got) != 0 {
		t.Errorf("names after the removal: %v", got)
	}
	// Back within namesEvery: the names file waits, and the first sync
	// after namesEvery writes it, with nothing else changed.
	feed(t, p.tracker, webManifest)
	sync()
	if got := names(); len(got) != 0 {
		t.Errorf("names rewritten within namesEvery: %v", got)
	}
	clock.advance(namesEvery)
	sync()
	if got := names(); cmp.Diff(wantNames, got) != "" {
		t.Errorf("names after namesEvery: %v", got)
	}
}

// A sync whose sets or rules fail is not an update for health, as in
// kube-proxy: the change it took still waits, and after twice the sync
// period /healthz and /livez answer 503, until a sync programs the node.
func TestHealthFollowsRules(t *testing.T) {
	const period = 30 * time.Second
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	p := newTestProxier(t, setup{period: period, now: clock.now})
	p.health.Updated()
	p.listed(t)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	synced := clock.t
	restore := p.breakSet(t, "KUBE-CLUSTER-IP")
	feed(t, p.tracker, webManifest)
	p.health.Queued()
	healthy := func() bool {
		t.Helper()
		code := statusCode(p.health.HealthzHandler(), "/healthz")
		live := statusCode(p.health.LivezHandler(), "/livez")
		if (code == http.StatusOK) != (live == http.StatusOK) {
			t.Errorf("/healthz %d, /livez %d", code, live)
		}
		return code == http.StatusOK
	}

	for range 3 {
		if err := p.Sync(context.Background()); err == nil {
			t.Error("a sync whose sets failed reported no error")
		}
		clock.advance(period)
	}
	if healthy() {
		t.Error("healthy after two sync periods of failing sets")
	}
	// As kube-proxy, a sync whose rules failed sets no last sync time.
	if got := gatheredValue(t, p.metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != float64(synced.Unix()) {
		t.Errorf("last sync time %v after syncs whose sets failed, want the last good one's, %v", got, synced.Unix())
	}
	restore()
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !healthy() {
		t.Error("not healthy after the sync that programmed the node")
	}
	if got := gatheredValue(t, p.metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "IPv4"); got != float64(clock.t.Unix()) {
		t.Errorf("last sync time %v, want %v", got, clock.t.Unix())
	}
}

// A sync that compared a piece of a reread of the kernel asks for the
// next sync at once: the rest of the compare does not wait for changes.
func TestRequestsSyncWhileSweeping(t *testing.T) {
	requests := 0
	p := newTestProxier(t, setup{request: func() { requests++ }})
	p.listed(t, webManifest)
	for _, sweeping := range []bool{false, true, true, false} {
		p.kernel.sweeping = sweeping
		before := requests
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if asked := requests > before; asked != sweeping {
			t.Errorf("a sync with Sweeping %v asked for another: %v", sweeping, asked)
		}
	}
}

// A sync whose dataplane asks for the whole state (it learned, reading
// the kernel, what changes ports it was not given) asks for the next
// sync at once and hands it the whole state; the one after goes back to
// changes.
func TestHandsWholeStateWhenAsked(t *testing.T) {
	requests := 0
	p := newTestProxier(t, setup{request: func() { requests++ }})
	p.listed(t, webManifest)
	for _, step := range []struct {
		needsState bool
		want       string
	}{{false, "sync"}, {true, "changes"}, {false, "sync"}, {false, "changes"}} {
		p.kernel.needsState, p.kernel.calls = step.needsState, nil
		before := requests
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(p.kernel.calls, step.want) {
			t.Errorf("calls %v, want %s", p.kernel.calls, step.want)
		}
		if asked := requests > before; asked != step.needsState {
			t.Errorf("a sync with NeedsState %v asked for another: %v", step.needsState, asked)
		}
	}
}

// A long sync logs progress lines while it runs, and none after. In a
// synctest bubble, whose clock moves only when every goroutine in it
// waits, the lines come exactly every progressEvery.
func TestProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		p := newTestProxier(t, setup{log: zap.New(core), period: time.Minute})
		p.kernel.block = make(chan struct{})
		p.listed(t)
		done := make(chan error, 1)
		go func() { done <- p.Sync(context.Background()) }()
		time.Sleep(progressEvery*2 + progressEvery/2)
		synctest.Wait()
		if n := logs.FilterMessage("sync in progress").Len(); n != 2 {
			t.Errorf("%d progress lines in 2.5 periods of a sync, want 2", n)
		}
		close(p.kernel.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * progressEvery)
		synctest.Wait()
		if n := logs.FilterMessage("sync in progress").Len(); n != 2 {
			t.Errorf("%d progress lines after the sync ended, want the 2 before", n)
		}
		if logs.FilterMessage("synced").Len() != 1 {
			t.Errorf("logs: %v", logs.All())
		}
	})
}

// Before the first listing ends, the proxier says it is waiting, every
// progressEvery, and stops once it has.
func TestWaitListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		p := newTestProxier(t, setup{log: zap.New(core)})
		done := make(chan struct{})
		go func() {
			p.WaitListed(context.Background())
			close(done)
		}()
		const waiting = "waiting for Services and EndpointSlices to be listed and the Node read"
		time.Sleep(progressEvery + progressEvery/2)
		synctest.Wait()
		if n := logs.FilterMessage(waiting).Len(); n != 1 {
			t.Errorf("%d lines in 1.5 periods of waiting, want 1", n)
		}
		p.listed(t)
		time.Sleep(progressEvery)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still waiting after the listing")
		}
	})
}
