//go:build hosttest

package main

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/conntrack"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The example deletes what it says, in a namespace of the test's.
func TestExampleRuns(t *testing.T) {
	ns := testutil.NewNetNS(t)
	cfg := &conntrack.Config{NetNS: ns.FD()}
	c, err := conntrack.Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var flows []conntrack.Flow
	for i, dst := range []string{"10.96.0.10", "10.96.0.10", "10.96.0.11", "fd00:96::10"} {
		src := "10.0.0.2"
		if netip.MustParseAddr(dst).Is6() {
			src = "fd00::2"
		}
		flows = append(flows, conntrack.Flow{Orig: conntrack.Tuple{
			Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
			Protocol: inet.UDP, SrcPort: uint16(40000 + i), DstPort: uint16(53 + i%2),
		}, Timeout: time.Minute})
	}
	if err := c.Create(ctx, flows...); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dest string
		want int
	}{
		{"10.96.0.10:54", 1},
		{"10.96.0.10", 1},
		{"10.96.0.10", 0},
		{"[fd00:96::10]:53", 0},
		{"fd00:96::10", 1},
	} {
		n, err := run(tt.dest, cfg)
		if err != nil || n != tt.want {
			t.Errorf("run(%q) = %d, %v; want %d", tt.dest, n, err, tt.want)
		}
	}
	if n, err := c.Count(ctx, conntrack.All()); err != nil || n != 1 {
		t.Errorf("%d entries left (%v), want the one to 10.96.0.11", n, err)
	}
}
