package dummytest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/ipvsplane/ipvsplane/dummy"
	"github.com/ipvsplane/ipvsplane/dummy/internal/seam"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"golang.org/x/sys/unix"
)

// Socket buffer sizes the Conns see: net.core.rmem_default and
// wmem_default, doubled by the kernel.
const (
	readBuffer  = 2 * 212992
	writeBuffer = 2 * 212992
)

// Options tune the fake; the zero value is a kernel with the dummy driver.
type Options struct {
	// WithoutDriver makes the kernel one built without CONFIG_DUMMY, as
	// the development hosts' is: creating a dummy link is EOPNOTSUPP
	// (dummy.ErrNotSupported).
	WithoutDriver bool
}

// Kernel is the links, addresses and routes of one network namespace, in
// memory. Its methods are safe for concurrent use.
type Kernel struct {
	opts Options

	mu        sync.Mutex
	links     []*link
	routes    []route
	lastIndex int32
}

type link struct {
	index int32
	name  string
	kind  string
	up    bool
	addrs []netip.Prefix
}

// route is an IPv4 route; the fake keeps no others.
type route struct {
	dst      netip.Prefix
	table    uint32
	oif      int32
	protocol uint8
	scope    uint8
	typ      uint8
	prefsrc  netip.Addr
}

// New returns a namespace as a fresh one is: only the loopback link, lo,
// index 1, up, without addresses. opts may be nil.
func New(opts *Options) *Kernel {
	k := &Kernel{lastIndex: 1, links: []*link{{index: 1, name: "lo", up: true}}}
	if opts != nil {
		k.opts = *opts
	}
	return k
}

// Dial returns a real *dummy.Conn whose socket reaches this kernel, as
// dummy.Dial(nil) returns one on the host's: its devices bind service
// addresses as addresses (dummy.BindAddresses). Conns of one Kernel share
// its links, as sockets in one namespace do.
func (k *Kernel) Dial() *dummy.Conn { return k.DialBinding(dummy.BindAddresses) }

// DialBinding is Dial with the binding dummy.Config.Binding would choose.
func (k *Kernel) DialBinding(binding dummy.Binding) *dummy.Conn {
	return seam.NewConn(nl.Serve(k.serve), readBuffer, writeBuffer, uint8(binding)).(*dummy.Conn)
}

// AddLink creates a link of the given kind ("dummy", "veth", ...) as
// another program would, with the next free index; a link of that name
// is EEXIST.
func (k *Kernel) AddLink(name, kind string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.link(name) != nil {
		return fmt.Errorf("dummytest: add link %s: %w", name, unix.EEXIST)
	}
	k.addLink(name, kind)
	return nil
}

// DeleteLink deletes a link as another program would, with its addresses
// and the routes through it; a missing link is ENODEV.
func (k *Kernel) DeleteLink(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.link(name)
	if l == nil {
		return fmt.Errorf("dummytest: delete link %s: %w", name, unix.ENODEV)
	}
	k.deleteLink(l)
	return nil
}

// Dump prints the links other than lo with their addresses, and the
// routes, much as ip addr and ip route show table local do:
//
//	2: kube-ipvs0 dummy
//	    inet 10.96.0.1/32
//	local 10.96.0.1/32 dev kube-ipvs0 table 255 proto 2 scope 254 src 10.96.0.1
func (k *Kernel) Dump() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, l := range k.links[1:] {
		fmt.Fprintf(&b, "%d: %s %s\n", l.index, l.name, l.kind)
		for _, p := range l.addrs {
			inet := "inet"
			if p.Addr().Is6() {
				inet = "inet6"
			}
			fmt.Fprintf(&b, "    %s %v\n", inet, p)
		}
	}
	for _, r := range k.routes {
		fmt.Fprintf(&b, "local %v dev %s table %d proto %d scope %d", r.dst, k.byIndex(r.oif).name, r.table, r.protocol, r.scope)
		if r.prefsrc.IsValid() {
			fmt.Fprintf(&b, " src %v", r.prefsrc)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// link finds a link by name; k.mu is held.
func (k *Kernel) link(name string) *link {
	i := slices.IndexFunc(k.links, func(l *link) bool { return l.name == name })
	if i < 0 {
		return nil
	}
	return k.links[i]
}

// byIndex finds a link by index; k.mu is held.
func (k *Kernel) byIndex(index int32) *link {
	i := slices.IndexFunc(k.links, func(l *link) bool { return l.index == index })
	if i < 0 {
		return nil
	}
	return k.links[i]
}

// addLink creates a link, down, with the next index the kernel would
// give; k.mu is held.
func (k *Kernel) addLink(name, kind string) *link {
	k.lastIndex++
	l := &link{index: k.lastIndex, name: name, kind: kind}
	k.links = append(k.links, l)
	return l
}

// deleteLink removes a link with its addresses and the routes through
// it; k.mu is held.
func (k *Kernel) deleteLink(l *link) {
	k.links = slices.DeleteFunc(k.links, func(x *link) bool { return x == l })
	k.routes = slices.DeleteFunc(k.routes, func(r route) bool { return r.oif == l.index })
}
