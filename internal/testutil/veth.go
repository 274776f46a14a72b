package testutil

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Veth connects two namespaces with a veth pair, name in n and peerName in
// peer, and sets both ends up. Addresses and routes are the caller's.
func (n *NetNS) Veth(t testing.TB, name string, peer *NetNS, peerName string) {
	t.Helper()
	h, err := netlink.NewHandleAt(netns.NsHandle(n.FD()), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, Flags: unix.IFF_UP},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(peer.FD()),
	}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s-%s: %v", name, peerName, err)
	}
	ph, err := netlink.NewHandleAt(netns.NsHandle(peer.FD()), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer ph.Close()
	link, err := ph.LinkByName(peerName)
	if err == nil {
		err = ph.LinkSetUp(link)
	}
	if err != nil {
		t.Fatalf("veth peer %s: %v", peerName, err)
	}
}

// IP runs iproute2's ip in the namespace ("addr add 10.0.0.1/24 dev v0").
func (n *NetNS) IP(t testing.TB, args ...string) {
	t.Helper()
	RequireProgram(t, "ip")
	if _, err := n.Output(t.Context(), "ip", args...); err != nil {
		t.Fatal(fmt.Errorf("in the test namespace: %w", err))
	}
}
