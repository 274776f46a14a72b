package dummy

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// The fault hook fails operations, and each address of a batch, with its
// errno before they reach the kernel; nothing here needs privileges, as
// nothing is sent.
func TestFaultHook(t *testing.T) {
	var asked []string
	c, err := Dial(&Config{Fault: func(req string) error {
		asked = append(asked, req)
		return unix.ENOMEM
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Get(ctx, "kube-ipvs0"); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("Get: %v", err)
	}
	d := &Device{conn: c, name: "kube-ipvs0", index: 1}
	addrs := []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")}
	err = d.BindAll(ctx, addrs)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed[1].Addr != addrs[1] || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("BindAll: %v; want each address failed with ENOMEM", err)
	}
	if want := []string{"get", "bind", "bind"}; len(asked) != 3 || asked[0] != want[0] || asked[2] != want[2] {
		t.Errorf("the hook was asked about %q, want %q", asked, want)
	}
}
