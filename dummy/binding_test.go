package dummy

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The local route is the one the kernel installs for an address of its
// own (`local 10.96.0.10 dev kube-ipvs0 proto kernel scope host src
// 10.96.0.10`), with RouteProtocol for its protocol and no preferred
// source.
func TestRouteMessage(t *testing.T) {
	a := netip.MustParseAddr("10.96.0.10")
	b := routeMessage(7, a)
	want := []byte{
		uapi.AF_INET, 32, 0, 0, // family, dst_len, src_len, tos
		uapi.RT_TABLE_LOCAL, RouteProtocol, uapi.RT_SCOPE_HOST, uapi.RTN_LOCAL,
		0, 0, 0, 0, // flags
	}
	attr := func(typ uint16, payload ...byte) {
		want = binary.NativeEndian.AppendUint16(want, uint16(4+len(payload)))
		want = binary.NativeEndian.AppendUint16(want, typ)
		want = append(want, payload...)
	}
	attr(uapi.RTA_DST, 10, 96, 0, 10)
	attr(uapi.RTA_OIF, binary.NativeEndian.AppendUint32(nil, 7)...)
	attr(uapi.RTA_TABLE, binary.NativeEndian.AppendUint32(nil, uapi.RT_TABLE_LOCAL)...)
	if !slices.Equal(b, want) {
		t.Errorf("route message\n%x, want\n%x", b, want)
	}
	if got, ok, err := decodeRoute(b, 7); err != nil || !ok || got != a {
		t.Errorf("decodes as %v, %v, %v", got, ok, err)
	}
}

// route encodes a route as the kernel dumps it, changed by edit.
func route(dst string, edit func(b []byte)) []byte {
	a := netip.MustParseAddr(dst)
	w := nl.Writer{B: make([]byte, rtmsgLen, 64)}
	family, bits := byte(uapi.AF_INET), byte(32)
	if a.Is6() {
		family, bits = uapi.AF_INET6, 128
	}
	w.B[0], w.B[1], w.B[4], w.B[5], w.B[6], w.B[7] = family, bits, uapi.RT_TABLE_LOCAL, RouteProtocol, uapi.RT_SCOPE_HOST, uapi.RTN_LOCAL
	w.Uint32(uapi.RTA_TABLE, uapi.RT_TABLE_LOCAL)
	w.Addr(uapi.RTA_DST, a)
	w.Addr(uapi.RTA_PREFSRC, a)
	w.Uint32(uapi.RTA_OIF, 7)
	if edit != nil {
		edit(w.B)
	}
	return w.B
}

// A route dump holds every table's routes; only the package's local host
// routes through the device are bindings.
func TestDecodeRouteFilters(t *testing.T) {
	setOIF := func(b []byte) { binary.NativeEndian.PutUint32(b[len(b)-4:], 8) }
	tests := []struct {
		name string
		msg  []byte
		ours bool
	}{
		{"ours", route("10.96.0.1", nil), true},
		{"the kernel's", route("10.96.0.1", func(b []byte) { b[5] = uapi.RTPROT_KERNEL }), false},
		{"static", route("10.96.0.1", func(b []byte) { b[5] = uapi.RTPROT_STATIC }), false},
		{"main table", route("10.96.0.1", func(b []byte) { b[4] = uapi.RT_TABLE_MAIN; b[rtmsgLen+4] = uapi.RT_TABLE_MAIN }), false},
		{"table id only in RTA_TABLE", route("10.96.0.1", func(b []byte) { b[4] = uapi.RT_TABLE_COMPAT; b[rtmsgLen+5] = 1 }), false},
		{"other device", route("10.96.0.1", setOIF), false},
		{"unicast", route("10.96.0.1", func(b []byte) { b[7] = uapi.RTN_UNICAST }), false},
		{"a prefix", route("10.96.0.0", func(b []byte) { b[1] = 24 }), false},
		{"IPv6", route("fd00::1", nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok, err := decodeRoute(tt.msg, 7)
			if err != nil || ok != tt.ours {
				t.Errorf("decodeRoute: %v, ours %v, %v; want ours %v", a, ok, err, tt.ours)
			}
		})
	}
	if _, _, err := decodeRoute(route("10.96.0.1", nil)[:rtmsgLen+6], 7); err == nil {
		t.Error("a truncated attribute decodes without an error")
	}
}

// fakeRoutes plays a kernel holding routes and addresses on kube-ipvs0
// (index 7): it answers dumps from them, adds and deletes them with the
// kernel's errors, and records every request.
type fakeRoutes struct {
	routes, addrs map[netip.Addr]bool
	seen          []netlink.Message
}

func (f *fakeRoutes) handle(reqs []netlink.Message) []netlink.Message {
	var out []netlink.Message
	for _, req := range reqs {
		f.seen = append(f.seen, req)
		switch req.Header.Type {
		case uapi.RTM_GETLINK:
			out = append(out, fakeLinks([]netlink.Message{req})...)
		case uapi.RTM_GETROUTE:
			out = append(out, f.dump(req, uapi.RTM_NEWROUTE, f.routes, func(a netip.Addr) []byte { return route(a.String(), nil) })...)
		case uapi.RTM_GETADDR:
			out = append(out, f.dump(req, uapi.RTM_NEWADDR, f.addrs, func(a netip.Addr) []byte { return addrMessage(7, a) })...)
		case uapi.RTM_NEWROUTE, uapi.RTM_DELROUTE:
			a, _, _ := decodeRoute(req.Data, 7)
			out = append(out, nl.Ack(req, f.change(f.routes, a, req.Header.Type == uapi.RTM_NEWROUTE, unix.EEXIST, unix.ESRCH), ""))
		case uapi.RTM_NEWADDR, uapi.RTM_DELADDR:
			a, _, _ := decodeAddr(req.Data, 7)
			out = append(out, nl.Ack(req, f.change(f.addrs, a, req.Header.Type == uapi.RTM_NEWADDR, 0, unix.EADDRNOTAVAIL), ""))
		}
	}
	return out
}

func (f *fakeRoutes) dump(req netlink.Message, typ uint16, set map[netip.Addr]bool, encode func(netip.Addr) []byte) []netlink.Message {
	var out []netlink.Message
	for a := range set {
		out = append(out, netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Multi, Sequence: req.Header.Sequence}, Data: encode(a)})
	}
	done := netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: req.Header.Sequence}, Data: make([]byte, 4)}
	return append(out, done)
}

// change adds or removes a, failing as the kernel does when it is there
// or missing.
func (f *fakeRoutes) change(set map[netip.Addr]bool, a netip.Addr, add bool, exists, missing unix.Errno) int {
	switch {
	case add && set[a]:
		return int(exists)
	case !add && !set[a]:
		return int(missing)
	}
	if add {
		set[a] = true
	} else {
		delete(set, a)
	}
	return 0
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// In BindLocalRoutes mode IPv4 addresses are bound as routes, IPv6 ones as
// addresses; binding twice and unbinding a missing route succeed, and the
// IPv4 addresses of the device are leftovers, not bindings.
func TestLocalRoutesMode(t *testing.T) {
	f := &fakeRoutes{routes: map[netip.Addr]bool{}, addrs: map[netip.Addr]bool{netip.MustParseAddr("10.96.0.99"): true}}
	c := newConn(nl.NewConn(nl.Serve(f.handle), 1<<20, 1<<20))
	c.binding = BindLocalRoutes
	defer c.Close()
	ctx := context.Background()
	d, err := c.Get(ctx, "kube-ipvs0")
	if err != nil {
		t.Fatal(err)
	}
	want := addrs("10.96.0.1", "10.96.0.2", "fd00::1")
	for range 2 {
		if err := d.BindAll(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Bind(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if !f.routes[want[0]] || !f.routes[want[1]] || !f.addrs[want[2]] {
		t.Errorf("routes %v, addresses %v", f.routes, f.addrs)
	}
	got, err := d.Addresses(ctx)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Addresses: %v, %v; want %v", got, err, want)
	}
	left, err := d.Leftovers(ctx)
	if err != nil || !slices.Equal(left, addrs("10.96.0.99")) {
		t.Errorf("Leftovers: %v, %v; want 10.96.0.99", left, err)
	}
	if err := d.UnbindLeftovers(ctx, left); err != nil || f.addrs[left[0]] {
		t.Errorf("UnbindLeftovers: %v; addresses %v", err, f.addrs)
	}
	for range 2 {
		if err := d.UnbindAll(ctx, want); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Unbind(ctx, want[0]); err != nil {
		t.Errorf("Unbind of a missing route: %v", err)
	}
	if len(f.routes) != 0 || len(f.addrs) != 0 {
		t.Errorf("left routes %v, addresses %v", f.routes, f.addrs)
	}
}

// In BindAddresses mode the package's routes are leftovers, removed as
// routes; a route delete the kernel refuses names its address.
func TestAddressModeLeftovers(t *testing.T) {
	f := &fakeRoutes{routes: map[netip.Addr]bool{netip.MustParseAddr("10.96.0.7"): true}, addrs: map[netip.Addr]bool{}}
	c := newConn(nl.NewConn(nl.Serve(f.handle), 1<<20, 1<<20))
	defer c.Close()
	ctx := context.Background()
	d, err := c.Get(ctx, "kube-ipvs0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Bind(ctx, netip.MustParseAddr("10.96.0.1")); err != nil || !f.addrs[netip.MustParseAddr("10.96.0.1")] {
		t.Fatalf("Bind: %v; addresses %v", err, f.addrs)
	}
	if got, err := d.Addresses(ctx); err != nil || !slices.Equal(got, addrs("10.96.0.1")) {
		t.Errorf("Addresses: %v, %v; want only the address", got, err)
	}
	left, err := d.Leftovers(ctx)
	if err != nil || !slices.Equal(left, addrs("10.96.0.7")) {
		t.Fatalf("Leftovers: %v, %v; want 10.96.0.7", left, err)
	}
	if err := d.UnbindLeftovers(ctx, left); err != nil || len(f.routes) != 0 {
		t.Errorf("UnbindLeftovers: %v; routes %v", err, f.routes)
	}
	last := f.seen[len(f.seen)-1]
	if last.Header.Type != uapi.RTM_DELROUTE || last.Data[5] != RouteProtocol {
		t.Errorf("the leftover was removed with %v, protocol %d", last.Header.Type, last.Data[5])
	}
	var be *BatchError
	err = d.UnbindLeftovers(ctx, []netip.Addr{{}})
	if !errors.As(err, &be) || be.Failed[0].Op != "unbind" {
		t.Errorf("an invalid leftover: %v", err)
	}
}

func TestBindingString(t *testing.T) {
	for b, want := range map[Binding]string{BindAddresses: "address", BindLocalRoutes: "local-route", 7: "Binding(7)"} {
		if got := b.String(); got != want {
			t.Errorf("%d: %q, want %q", b, got, want)
		}
	}
	if _, err := Dial(&Config{Binding: 7}); err == nil {
		t.Error("Dial with an unknown binding succeeds")
	}
}
