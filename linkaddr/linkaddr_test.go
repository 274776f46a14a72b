package linkaddr

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// fakeNamespace plays a namespace's links and addresses: it answers link
// and address dumps, the latter of every link as a kernel without strict
// checking does.
type fakeNamespace struct {
	links map[int32]string
	addrs []fakeAddr
}

type fakeAddr struct {
	link        int32
	local, addr string
}

func (f *fakeNamespace) handle(reqs []netlink.Message) []netlink.Message {
	var out []netlink.Message
	part := func(typ uint16, data []byte) {
		out = append(out, netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Multi}, Data: data})
	}
	for _, req := range reqs {
		switch req.Header.Type {
		case uapi.RTM_GETLINK:
			for index, name := range f.links {
				w := nl.Writer{B: make([]byte, nl.IfInfoMsgLen)}
				binary.NativeEndian.PutUint32(w.B[4:], uint32(index))
				w.String(uapi.IFLA_IFNAME, name)
				part(uapi.RTM_NEWLINK, w.B)
			}
		case uapi.RTM_GETADDR:
			for _, a := range f.addrs {
				w := nl.Writer{B: make([]byte, nl.IfAddrMsgLen)}
				binary.NativeEndian.PutUint32(w.B[4:], uint32(a.link))
				if a.local != "" {
					w.Addr(uapi.IFA_LOCAL, netip.MustParseAddr(a.local))
				}
				w.Addr(uapi.IFA_ADDRESS, netip.MustParseAddr(a.addr))
				part(uapi.RTM_NEWADDR, w.B)
			}
		}
		part(uint16(netlink.Done), make([]byte, 4))
	}
	return out
}

// The addresses of every link but the excepted one, an IPv4
// point-to-point link's own address rather than its peer's.
func TestAddresses(t *testing.T) {
	f := &fakeNamespace{
		links: map[int32]string{1: "lo", 2: "eth0", 3: "kube-ipvs0", 4: "tun0"},
		addrs: []fakeAddr{
			{link: 1, addr: "127.0.0.1"},
			{link: 2, addr: "192.0.2.5"},
			{link: 2, addr: "2001:db8::5"},
			{link: 3, addr: "10.96.0.10"},
			{link: 4, local: "198.51.100.1", addr: "198.51.100.2"},
		},
	}
	c := newConn(nl.NewConn(nl.Serve(f.handle), 1<<20, 1<<20))
	defer c.Close()
	if c.strict {
		t.Fatal("strict checking on a fake kernel")
	}
	got, err := c.Addresses(t.Context(), "kube-ipvs0")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.5"),
		netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::5")}
	if !slices.Equal(got, want) {
		t.Errorf("Addresses = %v, want %v", got, want)
	}
}

// A kernel's refusal names what was read and keeps the errno.
func TestAddressesError(t *testing.T) {
	c := newConn(nl.NewConn(nl.Serve(func(reqs []netlink.Message) []netlink.Message {
		return []netlink.Message{nl.Ack(reqs[0], int(unix.EPERM), "")}
	}), 1<<20, 1<<20))
	defer c.Close()
	_, err := c.Addresses(t.Context())
	if err == nil || !errors.Is(err, unix.EPERM) || !strings.HasPrefix(err.Error(), "linkaddr: links: ") {
		t.Errorf("error %v, want linkaddr: links: ... EPERM", err)
	}
}
