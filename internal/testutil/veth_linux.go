package testutil

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
)

// Veth connects two namespaces with a veth pair, name in n and peerName in
// peer, and sets both ends up. Addresses and routes are the caller's.
func (n *NetNS) Veth(t testing.TB, name string, peer *NetNS, peerName string) {
	t.Helper()
	w := nl.Writer{B: linkMessage(name, 0)}
	info := w.Begin(uapi.IFLA_LINKINFO)
	w.String(uapi.IFLA_INFO_KIND, "veth")
	data := w.Begin(uapi.IFLA_INFO_DATA)
	peerInfo := w.Begin(vethInfoPeer)
	w.B = append(w.B, linkMessage(peerName, 0)...)
	w.Uint32(uapi.IFLA_NET_NS_FD, uint32(peer.FD()))
	w.End(peerInfo)
	w.End(data)
	w.End(info)
	if err := n.rtnetlink(uapi.RTM_NEWLINK, netlink.Create|netlink.Excl, w.B); err != nil {
		t.Fatalf("veth %s-%s: %v", name, peerName, err)
	}
	// Each end is set up once both exist: a veth without its peer refuses
	// to open (ENOTCONN).
	if err := n.rtnetlink(uapi.RTM_NEWLINK, 0, linkMessage(name, uapi.IFF_UP)); err != nil {
		t.Fatalf("veth %s up: %v", name, err)
	}
	if err := peer.rtnetlink(uapi.RTM_NEWLINK, 0, linkMessage(peerName, uapi.IFF_UP)); err != nil {
		t.Fatalf("veth peer %s up: %v", peerName, err)
	}
}

// vethInfoPeer is VETH_INFO_PEER from include/uapi/linux/veth.h: the
// peer's struct ifinfomsg and attributes.
const vethInfoPeer = 1

// linkMessage encodes struct ifinfomsg setting the flags given (and
// changing only those), then the link's name.
func linkMessage(name string, flags uint32) []byte {
	const ifinfomsgLen = 16
	w := nl.Writer{B: make([]byte, ifinfomsgLen, 64)}
	binary.NativeEndian.PutUint32(w.B[8:], flags)  // ifi_flags
	binary.NativeEndian.PutUint32(w.B[12:], flags) // ifi_change
	w.String(uapi.IFLA_IFNAME, name)
	return w.B
}

// rtnetlink sends one acknowledged request to the namespace's routing
// netlink.
func (n *NetNS) rtnetlink(typ uint16, flags netlink.HeaderFlags, data []byte) error {
	c, err := nl.Dial(uapi.NETLINK_ROUTE, n.FD())
	if err != nil {
		return err
	}
	defer c.Close()
	r := &nl.Request{Type: typ, Flags: flags | netlink.Acknowledge, Data: data}
	if err := c.Exchange(context.Background(), r); err != nil {
		return err
	}
	return r.Err
}

// IP runs iproute2's ip in the namespace ("addr add 10.0.0.1/24 dev v0").
func (n *NetNS) IP(t testing.TB, args ...string) {
	t.Helper()
	RequireProgram(t, "ip")
	if _, err := n.Output(t.Context(), "ip", args...); err != nil {
		t.Fatal(fmt.Errorf("in the test namespace: %w", err))
	}
}

// Link joins peer to n, its router, with a veth pair: name in n holds
// addr and peerName in peer holds peerAddr (prefixes, "10.0.1.1/24" and
// "10.0.1.2/24"), and peer's default route goes through n's address.
// Further addresses and routes are the caller's.
func (n *NetNS) Link(t testing.TB, name string, peer *NetNS, peerName, addr, peerAddr string) {
	t.Helper()
	gw, err := netip.ParsePrefix(addr)
	if err != nil {
		t.Fatal(err)
	}
	n.Veth(t, name, peer, peerName)
	n.IP(t, "addr", "add", addr, "dev", name)
	peer.IP(t, "addr", "add", peerAddr, "dev", peerName)
	peer.IP(t, "route", "add", "default", "via", gw.Addr().String())
}
