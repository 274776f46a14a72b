//go:build vmtest

package ipvs

import (
	"context"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

func TestSmoke(t *testing.T) {
	testutil.RequireVM(t)
	ns := testutil.NewNetNS(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	info, err := c.Info(ctx)
	t.Logf("info %+v %v", info, err)
	s := Service{Protocol: TCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Scheduler: "rr"}
	if err := c.CreateService(ctx, s); err != nil {
		t.Fatal(err)
	}
	err = c.CreateService(ctx, s)
	t.Logf("dup: %v", err)
	d := Destination{Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080, Weight: 1}
	if err := c.CreateDestination(ctx, s, d); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetService(ctx, s)
	t.Logf("get: %+v %v", got, err)
	tab, err := c.Table(ctx)
	t.Logf("table: %+v %v", tab, err)
	t.Log(ns.Run(t, "ipvsadm", "-Ln", "--exact"))
	t.Log(ns.Run(t, "ipvsadm", "-S", "-n"))
	var b Batch
	for i := range 5 {
		b.CreateDestination(s, Destination{Addr: netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), Port: 8080, Weight: 1})
	}
	b.DeleteService(Service{Protocol: UDP, Addr: netip.MustParseAddr("10.0.0.9"), Port: 1})
	t.Logf("batch: %v", c.Apply(ctx, &b))
	err = c.CreateService(ctx, Service{Protocol: TCP, Addr: netip.MustParseAddr("10.0.0.2"), Port: 80, Scheduler: "nope"})
	t.Logf("bad sched: %v", err)
	tm, err := c.Timeouts(ctx)
	t.Logf("timeouts %+v %v", tm, err)
	t.Log(ns.Run(t, "ipvsadm", "-S", "-n"))
}
