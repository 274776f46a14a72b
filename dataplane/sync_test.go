package dataplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/plan"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// Sync's paths on the kernel packages' fakes, in plain go test. The VM
// tests (dataplane_vm_test.go, faults_vm_test.go) run the same scenarios
// on real kernels with traffic.

// A first sync reads the empty kernel and programs all of it: virtual
// servers, sets, the device's addresses, the rules and the sysctls.
func TestSyncFirst(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}

	res := syncOK(t, d, context.Background(), state)

	if !res.Full || res.Plan.Len() == 0 {
		t.Errorf("first sync: full=%v with %d operations, want a full sync that programs", res.Full, res.Plan.Len())
	}
	checkKernel(t, n, state)
	if got, want := n.IPVS.Dump(), "  -> 10.244.2.2:8080 masq 1\n"; !strings.Contains(got, "TCP 10.96.0.10:80 rr\n") || !strings.Contains(got, want) {
		t.Errorf("IPVS:\n%s", got)
	}
	if got := n.Links.Dump(); !strings.Contains(got, "10.96.0.10") || !strings.Contains(got, "198.51.100.10") {
		t.Errorf("the device does not hold the service's addresses:\n%s", got)
	}
	if got, err := os.ReadFile(filepath.Join(n.ProcSys, "net/ipv4/ip_forward")); err != nil || strings.TrimSpace(string(got)) != "1" {
		t.Errorf("net.ipv4.ip_forward = %q, %v; want 1", got, err)
	}
	if res := syncOK(t, d, context.Background(), state); res.Full || res.Plan.Len() != 0 {
		t.Errorf("a sync with nothing changed: full=%v\n%s", res.Full, res.Plan)
	}
}

// After the first sync, a sync plans only the service ports that changed,
// by Sync's comparison or SyncChanges' list, and reads nothing back.
func TestSyncIncremental(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	web := fixture.Web()
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{web}}
	syncOK(t, d, context.Background(), state)

	// The sets' entries change by the type the dataplane made each set
	// with: no request asks the kernel for it first.
	setRequests := map[string]int{}
	countSets := fault.With(context.Background(), func(pkg, req string) error {
		if pkg == "ipset" {
			setRequests[req]++
		}
		return nil
	})
	api := fixture.Svc("default", "api", "", inet.TCP, 443, "10.96.0.20")
	api.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.3", 8443, "node-a")}
	state.Services = append(state.Services, api)
	res := syncOK(t, d, countSets, state)
	if res.Full || !strings.Contains(res.Plan.String(), "10.96.0.20:443") || strings.Contains(res.Plan.String(), "10.96.0.10") {
		t.Errorf("adding a service port: full=%v, want it alone planned:\n%s", res.Full, res.Plan)
	}
	checkKernel(t, n, state)

	api.Endpoints = append(api.Endpoints, fixture.Ready("10.244.2.3", 8443, "node-b"))
	res, err := d.SyncChanges(context.Background(), []model.Change{{Name: api.Name, Port: &api}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	if got := res.Plan.String(); res.Full || !strings.Contains(got, "10.244.2.3:8443") || strings.Contains(got, "10.96.0.10") {
		t.Errorf("an endpoint added through SyncChanges: full=%v\n%s", res.Full, got)
	}
	state.Services[1] = api
	checkKernel(t, n, state)

	res, err = d.SyncChanges(countSets, []model.Change{{Name: api.Name}})
	if err != nil || len(res.Errors) > 0 {
		t.Fatal(err, res.Errors)
	}
	state.Services = state.Services[:1]
	checkKernel(t, n, state)
	if setRequests["add"] == 0 || setRequests["delete"] == 0 || setRequests["header"] != 0 {
		t.Errorf("set requests %v: want entries added and deleted, and no header asked for", setRequests)
	}
}

// A real server whose endpoint left while it has connections drains at
// weight 0 and is deleted once they end, or when the drain timeout
// passes; one without connections is deleted at once.
func TestSyncDrain(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	d, n := newFakeDataplane(t, &dataplane.Config{DrainTimeout: 10 * time.Second, Now: func() time.Time { return now }})
	web := fixture.Web()
	idle := fixture.Svc("default", "idle", "", inet.TCP, 81, "10.96.0.11")
	idle.Endpoints = web.Endpoints
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{web, idle}}
	syncOK(t, d, context.Background(), state)
	vs := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: fixture.IP("10.96.0.10"), Port: 80}
	if err := n.IPVS.SetConnections(vs, fixture.IP("10.244.2.2"), 8080, 1, 0); err != nil {
		t.Fatal(err)
	}

	state.Services[0].Endpoints = web.Endpoints[:1]
	state.Services[1].Endpoints = web.Endpoints[:1]
	res := syncOK(t, d, context.Background(), state)
	got := res.Plan.String()
	if !strings.Contains(got, "ipvs edit TCP 10.96.0.10:80 -> 10.244.2.2:8080 weight 0") {
		t.Errorf("the removed endpoint with a connection was not drained:\n%s", got)
	}
	if !strings.Contains(got, "ipvs del TCP 10.96.0.11:81 -> 10.244.2.2:8080") {
		t.Errorf("the removed idle endpoint was not deleted at once:\n%s", got)
	}

	now = now.Add(time.Second)
	if res := syncOK(t, d, context.Background(), state); strings.Contains(res.Plan.String(), "10.244.2.2") {
		t.Errorf("a draining real server with a connection was touched:\n%s", res.Plan)
	}
	if err := n.IPVS.SetConnections(vs, fixture.IP("10.244.2.2"), 8080, 0, 0); err != nil {
		t.Fatal(err)
	}
	// Within a second of the last read the draining real servers are not
	// read again, whatever the syncs; after it they are.
	dumps := 0
	countDumps := fault.With(context.Background(), func(pkg, req string) error {
		if pkg == "ipvs" && req == "get destination" {
			dumps++
		}
		return nil
	})
	if res := syncOK(t, d, countDumps, state); dumps != 0 || strings.Contains(res.Plan.String(), "10.244.2.2") {
		t.Errorf("a sync within a second of the last read read %d virtual servers' real servers:\n%s", dumps, res.Plan)
	}
	now = now.Add(time.Second)
	if res := syncOK(t, d, countDumps, state); dumps != 1 || !strings.Contains(res.Plan.String(), "ipvs del TCP 10.96.0.10:80 -> 10.244.2.2:8080") {
		t.Errorf("the drained real server was not deleted when its connections ended (%d reads):\n%s", dumps, res.Plan)
	}
	checkKernel(t, n, state)

	// A connection that outlives the drain timeout does not keep it.
	state.Services[0].Endpoints = web.Endpoints
	syncOK(t, d, context.Background(), state)
	if err := n.IPVS.SetConnections(vs, fixture.IP("10.244.2.2"), 8080, 0, 3); err != nil {
		t.Fatal(err)
	}
	state.Services[0].Endpoints = web.Endpoints[:1]
	syncOK(t, d, context.Background(), state)
	now = now.Add(11 * time.Second)
	if res := syncOK(t, d, context.Background(), state); !strings.Contains(res.Plan.String(), "ipvs del TCP 10.96.0.10:80 -> 10.244.2.2:8080") {
		t.Errorf("the drain timeout passed and the real server stayed:\n%s", res.Plan)
	}
	checkKernel(t, n, state)
}

// An operation the kernel refuses is reported and planned again on the
// next sync; one refused with a transient errno is tried again within
// the sync.
func TestSyncRetry(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
	refuse := func(errno unix.Errno, times int) context.Context {
		return fault.With(context.Background(), func(pkg, req string) error {
			if pkg == "ipvs" && req == "new destination" && times > 0 {
				times--
				return errno
			}
			return nil
		})
	}

	res, err := d.Sync(refuse(unix.EPERM, 1), state)
	if err != nil {
		t.Fatal(err)
	}
	if op, ok := onlyFailure(t, res, unix.EPERM).(plan.AddReals); !ok {
		t.Errorf("failed operation %v, want the real servers'", op)
	}
	res = syncOK(t, d, context.Background(), state)
	if res.Full || !strings.Contains(res.Plan.String(), "ipvs add TCP 10.96.0.10:80 ->") {
		t.Errorf("the next sync (full=%v) did not add the refused real server again:\n%s", res.Full, res.Plan)
	}
	checkKernel(t, n, state)

	api := fixture.Svc("default", "api", "", inet.TCP, 443, "10.96.0.20")
	api.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.3", 8443, "node-a")}
	state.Services = append(state.Services, api)
	res = syncOK(t, d, refuse(unix.ENOBUFS, 2), state)
	if res.Retries == 0 {
		t.Error("a transient refusal was not retried within the sync")
	}
	checkKernel(t, n, state)
}

// What changes behind the dataplane's back is repaired: an outside flush
// at once (the canary sees it on the next sync), a weight change by the
// periodic reread of the kernel.
func TestSyncRepairsDrift(t *testing.T) {
	d, n, now, read := newRereadingDataplane(t)
	ctx := context.Background()
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
	syncOK(t, d, ctx, state)
	outside := n.IPVS.Dial()
	defer outside.Close()
	sets := n.Sets.Dial()
	defer sets.Close()
	rules := n.Rules.Dial()
	vs := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: fixture.IP("10.96.0.10"), Port: 80}
	for name, flush := range map[string]func() error{
		"ipvsadm -C": func() error { return outside.Flush(ctx) },
		"ipset flush": func() error {
			for _, name := range n.Sets.Names() {
				if err := sets.Flush(ctx, name); err != nil {
					return err
				}
			}
			return nil
		},
		"ip link del":       func() error { return n.Links.DeleteLink(dataplane.DefaultDevice) },
		"nft flush ruleset": func() error { rules.FlushRuleset(); return rules.Flush() },
	} {
		if err := flush(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		*now = now.Add(time.Second) // the canary looks at most once a second
		if res := syncOK(t, d, ctx, state); !res.Full || res.Plan.Len() == 0 {
			t.Errorf("after %s the next sync was full=%v with %d operations", name, res.Full, res.Plan.Len())
		}
		checkKernel(t, n, state)
	}

	edit := ipvs.Destination{Addr: fixture.IP("10.244.1.2"), Port: 8080, Weight: 7}
	if err := outside.UpdateDestination(ctx, vs, edit); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(time.Second)
	if res := syncOK(t, d, ctx, state); res.Full {
		t.Fatal("the canary saw a weight change")
	}
	*now = now.Add(time.Minute)
	if res := syncOK(t, d, ctx, state); res.Full {
		t.Error("the sync that started the periodic reread waited for it")
	}
	<-read
	res := syncOK(t, d, ctx, state)
	if !res.Full || !strings.Contains(res.Plan.String(), "ipvs edit TCP 10.96.0.10:80 -> 10.244.1.2:8080 weight 1") {
		t.Errorf("the sync after the periodic reread did not repair the weight (full=%v):\n%s", res.Full, res.Plan)
	}
	checkKernel(t, n, state)
}

// The periodic reread of a node larger than one piece is compared over
// several syncs: each reports Sweeping until the one that ends the
// compare, which is Full; the drift is repaired by then; and a change
// made while the sweep goes on is programmed by its own sync and stays.
func TestSyncSweepsRereadInPieces(t *testing.T) {
	d, n, now, read := newRereadingDataplane(t)
	ctx := context.Background()
	state := &model.State{Node: fixture.ClusterNode(), Services: fixture.Cluster(500, 3)}
	syncOK(t, d, ctx, state)
	outside := n.IPVS.Dial()
	defer outside.Close()
	for _, i := range []int{0, 250, 499} {
		s := state.Services[i]
		vs := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: s.ClusterIPs[0], Port: s.Port}
		if err := outside.UpdateDestination(ctx, vs, ipvs.Destination{Addr: s.Endpoints[0].Addr, Port: s.Endpoints[0].Port, Weight: 7}); err != nil {
			t.Fatal(err)
		}
	}
	*now = now.Add(time.Minute)
	if res := syncOK(t, d, ctx, state); res.Full || res.Sweeping {
		t.Fatalf("the sync that started the reread: full=%v sweeping=%v", res.Full, res.Sweeping)
	}
	<-read
	syncs := 0
	for ; ; syncs++ {
		if syncs == 2 {
			state.Services[300].Endpoints = state.Services[300].Endpoints[1:]
		}
		res := syncOK(t, d, ctx, state)
		if syncs == 2 && !strings.Contains(res.Plan.String(), "ipvs del TCP "+state.Services[300].ClusterIPs[0].String()) {
			t.Errorf("the change during the sweep was not programmed by its own sync:\n%s", res.Plan)
		}
		if res.Full {
			break
		}
		if !res.Sweeping || syncs > 200 {
			t.Fatalf("sync %d after the reread: neither full nor sweeping", syncs)
		}
	}
	if syncs < 3 {
		t.Errorf("the reread was compared in %d syncs, want pieces", syncs+1)
	}
	checkKernel(t, n, state)
	if res := syncOK(t, d, ctx, state); res.Full || res.Sweeping || res.Plan.Len() > 0 {
		t.Errorf("after the sweep: full=%v sweeping=%v\n%s", res.Full, res.Sweeping, res.Plan)
	}
}

// A set that fills is grown in place: a larger one replaces it under its
// name, with every entry, and the sync reports no failure.
func TestSyncGrowsFullSet(t *testing.T) {
	ctx := context.Background()
	d, n := newFakeDataplane(t, nil)
	sets := n.Sets.Dial()
	defer sets.Close()
	// Made small by an earlier run (or by hand): four entries at most.
	small := ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort, Family: inet.IPv4, MaxElem: 4}
	if err := sets.Create(ctx, small, 0); err != nil {
		t.Fatal(err)
	}
	state := &model.State{Node: fixture.VMNode(), Services: fixture.Numbered(1, 4)}
	syncOK(t, d, ctx, state)
	state.Services = append(state.Services, fixture.Numbered(4, 10)...)
	res := syncOK(t, d, ctx, state)
	if !strings.Contains(res.Plan.String(), "KUBE-CLUSTER-IP") {
		t.Fatalf("no entries added:\n%s", res.Plan)
	}
	h, entries, ok := n.Sets.Set("KUBE-CLUSTER-IP")
	if !ok || len(entries) != 9 || h.MaxElem < 9 {
		t.Errorf("KUBE-CLUSTER-IP: maxelem %d with %d entries (exists %v), want all 9", h.MaxElem, len(entries), ok)
	}
	checkKernel(t, n, state)
}

// ReadAhead's read stands in for the first sync's: a restarted dataplane
// that read the kernel ahead plans nothing, even for a change made after
// that read (the next full read repairs it, as documented).
func TestSyncReadAhead(t *testing.T) {
	ctx := context.Background()
	first, n := newFakeDataplane(t, nil)
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
	syncOK(t, first, ctx, state)

	read := make(chan struct{}, 1)
	d, err := n.Open(&dataplane.Config{KernelRead: func() { read <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.ReadAhead(ctx); err != nil {
		t.Fatal(err)
	}
	<-read
	outside := n.IPVS.Dial()
	defer outside.Close()
	weight := ipvs.Destination{Addr: fixture.IP("10.244.1.2"), Port: 8080, Weight: 7}
	vs := ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: fixture.IP("10.96.0.10"), Port: 80}
	if err := outside.UpdateDestination(ctx, vs, weight); err != nil {
		t.Fatal(err)
	}
	if res := syncOK(t, d, ctx, state); !res.Full || res.Plan.Len() != 0 {
		t.Errorf("the first sync after ReadAhead: full=%v, want the read ahead adopted whole:\n%s", res.Full, res.Plan)
	}
	d.Resync()
	if res := syncOK(t, d, ctx, state); !strings.Contains(res.Plan.String(), "weight 1") {
		t.Errorf("the full read after it did not repair the weight:\n%s", res.Plan)
	}
	checkKernel(t, n, state)
}

// A dataplane closed while its read ahead runs stops it (newFakeDataplane
// closes it when the test ends, and fails the test if that fails).
func TestSyncReadAheadClosed(t *testing.T) {
	d, _ := newFakeDataplane(t, nil)
	if err := d.ReadAhead(context.Background()); err != nil {
		t.Fatal(err)
	}
}
