package dummy

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/fault"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// fakeLinks answers link lookups with one dummy link, kube-ipvs0 at index
// 7, and acknowledges everything else.
func fakeLinks(reqs []netlink.Message) []netlink.Message {
	var out []netlink.Message
	for _, req := range reqs {
		if req.Header.Type == uapi.RTM_GETLINK {
			w := nl.Writer{B: linkMessage(7, "kube-ipvs0")}
			n := w.Begin(uapi.IFLA_LINKINFO)
			w.String(uapi.IFLA_INFO_KIND, "dummy")
			w.End(n)
			out = append(out, netlink.Message{Header: netlink.Header{Type: uapi.RTM_NEWLINK, Sequence: req.Header.Sequence}, Data: w.B})
		}
		if req.Header.Type == uapi.RTM_NEWADDR && binary.NativeEndian.Uint32(req.Data[4:8]) != 7 {
			out = append(out, nl.Ack(req, int(unix.ENODEV), ""))
			continue
		}
		out = append(out, nl.Ack(req, 0, ""))
	}
	return out
}

// The fault hook fails operations, and each address of a batch, with its
// errno before they reach the kernel.
func TestFaultHook(t *testing.T) {
	var asked []string
	c := newConn(nl.NewConn(nl.Serve(fakeLinks), 1<<20, 1<<20))
	defer c.Close()
	ctx := fault.With(context.Background(), func(pkg, req string) error {
		if pkg != "dummy" {
			t.Errorf("the hook was asked by package %q", pkg)
		}
		asked = append(asked, req)
		return unix.ENOMEM
	})
	if _, err := c.Get(ctx, "kube-ipvs0"); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("Get: %v", err)
	}
	d := &Device{conn: c, name: "kube-ipvs0"}
	addrs := []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")}
	err := d.BindAll(ctx, addrs)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed[1].Index != 1 || be.Total != 2 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("BindAll: %v; want each address failed with ENOMEM", err)
	}
	if want := []string{"get", "bind", "bind"}; len(asked) != 3 || asked[0] != want[0] || asked[2] != want[2] {
		t.Errorf("the hook was asked about %q, want %q", asked, want)
	}
}
