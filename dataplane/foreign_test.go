package dataplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/dataplanetest"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
	"github.com/ipvsplane/ipvsplane/ipset"
	"github.com/ipvsplane/ipvsplane/ipvs"
)

// vip is the virtual server of fixture.Web's external IP.
var vip = ipvs.Service{Family: inet.IPv4, Protocol: inet.TCP, Addr: fixture.IP("198.51.100.10"), Port: 80, Scheduler: "wlc"}

// keepalived is vip's real server as keepalived programs it.
var keepalived = ipvs.Destination{Addr: fixture.IP("192.0.2.5"), Port: 80, Weight: 3}

// makeVIP creates vip with keepalived's real server, as another program
// would, and with kubeProxy also kube-proxy's entry for it in
// KUBE-EXTERNAL-IP, as its IPVS mode makes it.
func makeVIP(t *testing.T, n *dataplanetest.Node, kubeProxy bool) {
	t.Helper()
	ctx := context.Background()
	c := n.IPVS.Dial()
	defer c.Close()
	if err := c.CreateService(ctx, vip); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDestination(ctx, vip, keepalived); err != nil {
		t.Fatal(err)
	}
	if !kubeProxy {
		return
	}
	sets := n.Sets.Dial()
	defer sets.Close()
	set := ipset.Set{Name: "KUBE-EXTERNAL-IP", Type: ipset.HashIPPort, Family: inet.IPv4}
	if err := sets.Create(ctx, set, 0); err != nil {
		t.Fatal(err)
	}
	if err := sets.Add(ctx, set.Name, ipset.Entry{Addr: vip.Addr, Protocol: inet.TCP, Port: 80}, 0); err != nil {
		t.Fatal(err)
	}
}

// vipReals returns vip's real servers, or ok false when it is gone.
func vipReals(t *testing.T, n *dataplanetest.Node) (reals []ipvs.Destination, ok bool) {
	t.Helper()
	c := n.IPVS.Dial()
	defer c.Close()
	ds, err := c.Destinations(context.Background(), vip)
	if errors.Is(err, ipvs.ErrServiceNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ds, true
}

// A virtual server that another program made (keepalived's VIP) at an
// external IP a Service names is neither adopted nor deleted, whether
// the start prefills or not; the Service is told. One that kube-proxy's
// IPVS mode made for an external IP (its KUBE-EXTERNAL-IP has it) is
// adopted at a takeover, as before.
func TestForeignVirtualServerNotAdopted(t *testing.T) {
	for _, tt := range []struct {
		name               string
		kubeProxy, prefill bool
	}{{"keepalived", false, false}, {"keepalived after a prefill", false, true}, {"kube-proxy's", true, false}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			d, n := newFakeDataplane(t, nil)
			makeVIP(t, n, tt.kubeProxy)
			state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
			if tt.prefill {
				if _, err := d.Prefill(ctx, state); err != nil {
					t.Fatal(err)
				}
			}
			res, err := d.Sync(ctx, state)
			if err != nil {
				t.Fatal(err)
			}
			reals, ok := vipReals(t, n)
			if tt.kubeProxy {
				if len(res.Errors) != 0 || len(reals) != 2 {
					t.Errorf("kube-proxy's virtual server not adopted: reals %v, errors %v", reals, res.Errors)
				}
				return
			}
			var se *model.SettingError
			if len(res.Errors) != 1 || !errors.As(res.Errors[0], &se) || se.Field != model.FieldExternalIPs {
				t.Errorf("errors %v, want the external IP's problem", res.Errors)
			}
			if !ok || len(reals) != 1 || reals[0].Addr != keepalived.Addr || reals[0].Weight != keepalived.Weight {
				t.Errorf("keepalived's virtual server was changed: %v %v\n%s", ok, reals, n.IPVS.Dump())
			}
			if _, entries, _ := n.Sets.Set("KUBE-IPVSPLANE-OWNED"); len(entries) != 2 {
				t.Errorf("ownership entries %v, want the cluster IP's and the node port's", entries)
			}
			// The Service goes; keepalived's stays.
			if _, err := d.Sync(ctx, &model.State{Node: fixture.VMNode()}); err != nil {
				t.Fatal(err)
			}
			if _, ok := vipReals(t, n); !ok {
				t.Errorf("keepalived's virtual server was deleted with the Service")
			}
		})
	}
}

// A dry run plans what a first sync does: another program's virtual
// server is left alone there too.
func TestDryRunLeavesForeignVirtualServer(t *testing.T) {
	d, n := newFakeDataplane(t, nil)
	makeVIP(t, n, false)
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
	pl, errs, err := d.DryRun(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	if s := pl.String(); strings.Contains(s, "198.51.100.10") || len(errs) != 1 {
		t.Errorf("the dry run touches keepalived's virtual server, or does not say so (%v):\n%s", errs, s)
	}
}

// Once another program's virtual server goes, a read of the kernel in a
// SyncChanges finds it gone: that sync asks for the whole state
// (NeedsState), and the Sync given it serves the external IP.
func TestForeignVirtualServerGone(t *testing.T) {
	ctx := context.Background()
	d, n := newFakeDataplane(t, nil)
	makeVIP(t, n, false)
	state := &model.State{Node: fixture.VMNode(), Services: []model.ServicePort{fixture.Web()}}
	if _, err := d.Sync(ctx, state); err != nil {
		t.Fatal(err)
	}
	c := n.IPVS.Dial()
	defer c.Close()
	if err := c.DeleteService(ctx, vip); err != nil {
		t.Fatal(err)
	}
	d.Resync()
	res, err := d.SyncChanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsState {
		t.Errorf("the read that found the program's virtual server gone does not ask for the state")
	}
	res = syncOK(t, d, ctx, state)
	if reals, ok := vipReals(t, n); !ok || len(reals) != 2 || res.NeedsState {
		t.Errorf("the external IP is not served once the program's virtual server went: %v %v", ok, reals)
	}
	checkKernel(t, n, state)
}
