package dataplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// The sysctls and the IPVS timeouts are written at the first sync and
// then only when the node's settings change, as kube-proxy writes them
// once at start: an operator's ipvsadm --set or sysctl made later stands
// through full syncs, whether a Resync or a rebuild of the model calls
// for them.
func TestNodeSettingsWrittenOnce(t *testing.T) {
	ctx := context.Background()
	d, n := newFakeDataplane(t, nil)
	node := fixture.VMNode()
	node.TCPTimeout, node.UDPTimeout = time.Hour, time.Minute
	state := &model.State{Node: node, Services: []model.ServicePort{fixture.Web()}}
	syncOK(t, d, ctx, state)
	if got, want := n.IPVS.Timeouts(), (ipvs.Timeouts{TCP: time.Hour, TCPFin: 2 * time.Minute, UDP: time.Minute}); got != want {
		t.Fatalf("first sync: timeouts %+v, want %+v", got, want)
	}
	checkSysctl(t, n, "net/ipv4/vs/expire_nodest_conn", "1")

	// The operator's settings.
	operator := ipvs.Timeouts{TCP: 2 * time.Hour, TCPFin: time.Minute, UDP: 30 * time.Second}
	if err := n.IPVS.Dial().SetTimeouts(ctx, operator); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.ProcSys, "net/ipv4/vs/expire_nodest_conn"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Resync()
	if res := syncOK(t, d, ctx, state); !res.Full {
		t.Fatal("the sync after Resync is not full")
	}
	state.Services = append(state.Services, fixture.Svc("default", "api", "", fixture.Web().Protocol, 443, "10.96.0.20"))
	state.Node.MasqueradeAll = true // a rebuild, with the same sysctls and timeouts
	if res := syncOK(t, d, ctx, state); !res.Full {
		t.Fatal("the sync after a node change is not full")
	}
	if got := n.IPVS.Timeouts(); got != operator {
		t.Errorf("after full syncs: timeouts %+v, want the operator's %+v", got, operator)
	}
	checkSysctl(t, n, "net/ipv4/vs/expire_nodest_conn", "0")

	// Settings that change are written, those alone.
	state.Node.TCPTimeout = 3 * time.Hour
	syncOK(t, d, ctx, state)
	if got, want := n.IPVS.Timeouts(), (ipvs.Timeouts{TCP: 3 * time.Hour, TCPFin: time.Minute, UDP: time.Minute}); got != want {
		t.Errorf("new timeouts: %+v, want %+v", got, want)
	}
	checkSysctl(t, n, "net/ipv4/vs/expire_nodest_conn", "0")
	state.Node.StrictARP = true
	syncOK(t, d, ctx, state)
	checkSysctl(t, n, "net/ipv4/conf/all/arp_ignore", "1")
	checkSysctl(t, n, "net/ipv4/vs/expire_nodest_conn", "1")
}

// A setting that could not be written is tried again at the next full
// sync.
func TestNodeSettingsRetried(t *testing.T) {
	ctx := context.Background()
	d, n := newFakeDataplane(t, nil)
	path := filepath.Join(n.ProcSys, "net/ipv4/ip_forward")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	state := &model.State{Node: fixture.VMNode()}
	if res, err := d.Sync(ctx, state); err != nil || len(res.Errors) == 0 {
		t.Fatalf("a sync without ip_forward: %v, errors %v", err, res.Errors)
	}
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Resync()
	syncOK(t, d, ctx, state)
	checkSysctl(t, n, "net/ipv4/ip_forward", "1")
}

func checkSysctl(t *testing.T, n *dataplanetest.Node, name, want string) {
	t.Helper()
	if got, err := os.ReadFile(filepath.Join(n.ProcSys, name)); err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("%s = %q, %v; want %s", name, got, err, want)
	}
}
