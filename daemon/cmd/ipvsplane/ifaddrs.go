package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// interfaceAddrs returns the addresses of the node's interfaces that can
// serve node ports, as kube-proxy's IPVS mode uses them: those of every
// interface but the dummy device, which holds the service IPs, that
// nodeAddr accepts. The loopback interface counts: an anycast address on
// lo serves node ports too.
//
// The daemon reads them every sync period. An address dump carries every
// address of the namespace, the dummy device's thousands of service IPs
// included, so with strict checking (Linux 4.20) the kernel is asked for
// one interface's at a time; without it, one dump is read and filtered.
func interfaceAddrs(device string) ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	defer c.Close()
	want := map[int32]bool{}
	for _, ifc := range ifaces {
		if ifc.Name != device {
			want[int32(ifc.Index)] = true
		}
	}
	if c.SetOption(netlink.GetStrictCheck, true) != nil {
		return dumpAddrs(c, 0, want)
	}
	var out []netip.Addr
	for index := range want {
		addrs, err := dumpAddrs(c, index, want)
		if err != nil {
			return nil, err
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// dumpAddrs dumps the addresses of link index (0: all links) and keeps
// those of the links in want that nodeAddr accepts.
func dumpAddrs(c *netlink.Conn, index int32, want map[int32]bool) ([]netip.Addr, error) {
	// struct ifaddrmsg: family, prefix length, flags, scope, index.
	req := make([]byte, 8)
	binary.NativeEndian.PutUint32(req[4:], uint32(index))
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETADDR, Flags: netlink.Request | netlink.Dump},
		Data:   req,
	})
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	var out []netip.Addr
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < 8 || !want[int32(binary.NativeEndian.Uint32(m.Data[4:8]))] {
			continue
		}
		if a, ok := ifaddr(m.Data); ok && nodeAddr(a) {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// ifaddr returns an RTM_NEWADDR message's address: IFA_LOCAL, which an
// IPv4 point-to-point link has besides its peer's IFA_ADDRESS, else
// IFA_ADDRESS.
func ifaddr(b []byte) (netip.Addr, bool) {
	ad, err := netlink.NewAttributeDecoder(b[8:])
	if err != nil {
		return netip.Addr{}, false
	}
	var local, addr netip.Addr
	for ad.Next() {
		a, ok := netip.AddrFromSlice(ad.Bytes())
		switch {
		case !ok:
		case ad.Type() == unix.IFA_LOCAL:
			local = a
		case ad.Type() == unix.IFA_ADDRESS:
			addr = a
		}
	}
	if local.IsValid() {
		return local, true
	}
	return addr, addr.IsValid()
}
