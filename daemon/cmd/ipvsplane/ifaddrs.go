package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
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
func interfaceAddrs(ctx context.Context, device string) ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	c, err := nl.Dial(unix.NETLINK_ROUTE, 0)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink: %w", err)
	}
	defer c.Close()
	want := map[int32]string{}
	for _, ifc := range ifaces {
		if ifc.Name != device {
			want[int32(ifc.Index)] = ifc.Name
		}
	}
	if c.SetStrictCheck() != nil {
		return dumpAddrs(ctx, c, 0, want)
	}
	var out []netip.Addr
	for index := range want {
		addrs, err := dumpAddrs(ctx, c, index, want)
		if err != nil {
			return nil, err
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// dumpAddrs dumps the addresses of link index (0: all links) and keeps
// those of the links in want that nodeAddr accepts.
func dumpAddrs(ctx context.Context, c *nl.Conn, index int32, want map[int32]string) ([]netip.Addr, error) {
	// struct ifaddrmsg: family, prefix length, flags, scope, index.
	req := make([]byte, 8)
	binary.NativeEndian.PutUint32(req[4:], uint32(index))
	var out []netip.Addr
	var decodeErr error
	r := &nl.Request{Type: unix.RTM_GETADDR, Flags: netlink.Dump, Data: req}
	r.Handle = func(m netlink.Message) {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < 8 || want[int32(binary.NativeEndian.Uint32(m.Data[4:8]))] == "" {
			return
		}
		a, err := ifaddr(m.Data)
		if err != nil && decodeErr == nil {
			decodeErr = err
		}
		if err == nil && nodeAddr(a) {
			out = append(out, a.Unmap())
		}
	}
	err := c.Exchange(ctx, r)
	if err == nil {
		err = r.Err
	}
	if err == nil {
		err = decodeErr
	}
	if err != nil && index != 0 {
		return nil, fmt.Errorf("addresses of %s: %w", want[index], err)
	}
	if err != nil {
		return nil, fmt.Errorf("addresses: %w", err)
	}
	return out, nil
}

// ifaddr returns an RTM_NEWADDR message's address: IFA_LOCAL, which an
// IPv4 point-to-point link has besides its peer's IFA_ADDRESS, else
// IFA_ADDRESS.
func ifaddr(b []byte) (netip.Addr, error) {
	var local, addr netip.Addr
	d := nl.NewReader(b[8:], "address")
	for d.Next() {
		switch d.Type() {
		case unix.IFA_LOCAL:
			local = d.Addr()
		case unix.IFA_ADDRESS:
			addr = d.Addr()
		}
	}
	if err := d.Err(); err != nil {
		return netip.Addr{}, err
	}
	if local.IsValid() {
		return local, nil
	}
	return addr, nil
}
