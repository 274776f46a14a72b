//go:build hosttest

package main

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

// The node's addresses are those of every interface but the service
// device, without loopback and IPv6 link-local ones: what interfaceAddrs
// reads link by link, checked against addresses set with ip.
func TestInterfaceAddrs(t *testing.T) {
	ns := testutil.NewNetNS(t)
	ns.Run(t, "ip", "link", "set", "lo", "up")
	ns.Run(t, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "eth9")
	for _, args := range [][]string{
		{"addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0"},
		{"addr", "add", "10.96.0.11/32", "dev", "kube-ipvs0"},
		{"addr", "add", "192.0.2.5/24", "dev", "eth9"},
		{"addr", "add", "2001:db8::5/64", "dev", "eth9", "nodad"},
		{"addr", "add", "198.51.100.7/32", "dev", "lo"},
		{"link", "set", "eth9", "up"},
	} {
		ns.Run(t, "ip", args...)
	}
	var got []netip.Addr
	err := ns.Do(func() (err error) {
		got, err = interfaceAddrs(t.Context(), "kube-ipvs0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	want := []netip.Addr{netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::5")}
	if !slices.Equal(got, want) {
		t.Errorf("interfaceAddrs = %v, want %v", got, want)
	}
	// A kernel without strict checking answers one dump of them all.
	err = ns.Do(func() error {
		c, err := nl.Dial(unix.NETLINK_ROUTE, 0)
		if err != nil {
			return err
		}
		defer c.Close()
		lo, err := net.InterfaceByName("lo")
		if err != nil {
			return err
		}
		eth, err := net.InterfaceByName("eth9")
		if err != nil {
			return err
		}
		got, err = dumpAddrs(t.Context(), c, 0, map[int32]string{int32(lo.Index): "lo", int32(eth.Index): "eth9"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	if !slices.Equal(got, want) {
		t.Errorf("one dump of all: %v, want %v", got, want)
	}
}
