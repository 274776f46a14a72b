package ipvs_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"github.com/ipvsplane/ipvsplane/ipvs/ipvstest"
	"golang.org/x/sys/unix"
)

// The fault hook fails the requests it picks with its errno, as the
// kernel would, and the others of the same write go through.
func TestFaultHook(t *testing.T) {
	k := ipvstest.New(nil)
	c := k.Dial()
	defer c.Close()
	var asked []string
	failNext := false
	ctx := withFault(t, "ipvs", func(req string) error {
		asked = append(asked, req)
		if len(asked)%3 == 0 || failNext {
			failNext = false
			return unix.ENOBUFS
		}
		return nil
	})

	var b ipvs.Batch
	for i := range 6 {
		b.CreateService(ipvs.Service{Protocol: inet.TCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), Port: 80, Scheduler: "rr"})
	}
	err := c.Apply(ctx, &b)
	var be *ipvs.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 {
		t.Fatalf("Apply: %v, want 2 failures", err)
	}
	for i, f := range be.Failed {
		if want := 3*i + 2; f.Index != want || !errors.Is(f, unix.ENOBUFS) || f.Object == "" {
			t.Errorf("failure %d: %+v, want operation %d with ENOBUFS", i, f, want)
		}
	}
	if n := len(k.Table()); n != 4 {
		t.Errorf("%d services reached the kernel, want 4", n)
	}
	if asked[0] != "new service" {
		t.Errorf("the hook was asked about %q", asked[0])
	}

	// A query fails with the errno too, and later ones work again.
	failNext = true
	_, err = c.Services(ctx)
	if !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("Services with a fault: %v", err)
	}
	asked = asked[:1]
	if svcs, err := c.Services(ctx); err != nil || len(svcs) != 4 {
		t.Errorf("Services: %d, %v", len(svcs), err)
	}
}

// withFault returns a context carrying a fault hook for package pkg.
func withFault(t *testing.T, pkg string, hook func(request string) error) context.Context {
	return fault.With(context.Background(), func(p, req string) error {
		if p != pkg {
			t.Errorf("the hook was asked by package %q, want %q", p, pkg)
		}
		return hook(req)
	})
}
