// Package linkaddr reads the addresses of a network namespace's links
// over rtnetlink: what a node's own addresses are, as a load balancer
// serving node ports on them needs to know, leaving out the device that
// holds its service addresses.
//
// The addresses are read every time they are asked for, since links and
// their addresses come and go. An address dump carries every address of
// the namespace, a service device's thousands included, so where the
// kernel filters dumps by link (strict checking, Linux 4.20) the links'
// addresses are asked for one link at a time; on older kernels one dump
// is read and filtered.
//
// Reading needs no privileges beyond being in the namespace. Failures
// name what was read ("linkaddr: addresses of eth0: ...") and keep the
// kernel's errno.
package linkaddr

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"github.com/mdlayher/netlink"
)

// Config is optional; a nil *Config means the calling process's network
// namespace.
type Config struct {
	// NetNS is a network namespace file descriptor; 0 means the current one.
	NetNS int
}

// Conn is an rtnetlink connection in one network namespace.
type Conn struct {
	nl *nl.Conn
	// strict is whether the kernel filters address dumps by link.
	strict bool
}

// Dial opens an rtnetlink connection in the namespace cfg names.
func Dial(cfg *Config) (*Conn, error) {
	var cf Config
	if cfg != nil {
		cf = *cfg
	}
	c, err := nl.Dial(uapi.NETLINK_ROUTE, cf.NetNS)
	if err != nil {
		return nil, fmt.Errorf("linkaddr: dial rtnetlink: %w", err)
	}
	return newConn(c), nil
}

func newConn(c *nl.Conn) *Conn {
	return &Conn{nl: c, strict: c.SetStrictCheck() == nil}
}

// Close closes the connection's socket.
func (c *Conn) Close() error {
	return c.nl.Close()
}

// Addresses returns the addresses of every link in the namespace but the
// links named in except, in no particular order: IFA_LOCAL where a link
// has it (an IPv4 point-to-point link's own address beside its peer's),
// else IFA_ADDRESS. Loopback, link-local and every other scope are
// included; the caller keeps those it serves on.
func (c *Conn) Addresses(ctx context.Context, except ...string) ([]netip.Addr, error) {
	links, err := c.links(ctx)
	if err != nil {
		return nil, fmt.Errorf("linkaddr: links: %w", err)
	}
	for _, name := range except {
		for index, n := range links {
			if n == name {
				delete(links, index)
			}
		}
	}
	if !c.strict {
		addrs, err := c.addresses(ctx, 0, links)
		if err != nil {
			return nil, fmt.Errorf("linkaddr: addresses: %w", err)
		}
		return addrs, nil
	}
	var out []netip.Addr
	for index, name := range links {
		addrs, err := c.addresses(ctx, index, links)
		if err != nil {
			return nil, fmt.Errorf("linkaddr: addresses of %s: %w", name, err)
		}
		out = append(out, addrs...)
	}
	return out, nil
}

// links dumps the namespace's links, by index.
func (c *Conn) links(ctx context.Context) (map[int32]string, error) {
	out := map[int32]string{}
	err := c.dump(ctx, uapi.RTM_GETLINK, uapi.RTM_NEWLINK, make([]byte, nl.IfInfoMsgLen), func(b []byte) error {
		index, name, _, err := nl.DecodeIfInfo(b)
		if err == nil {
			out[index] = name
		}
		return err
	})
	return out, err
}

// addresses dumps the addresses of link index (0: of every link) and
// keeps those of the links in want.
func (c *Conn) addresses(ctx context.Context, index int32, want map[int32]string) ([]netip.Addr, error) {
	// struct ifaddrmsg: family, prefix length, flags, scope, index.
	req := make([]byte, nl.IfAddrMsgLen)
	binary.NativeEndian.PutUint32(req[4:], uint32(index))
	var out []netip.Addr
	err := c.dump(ctx, uapi.RTM_GETADDR, uapi.RTM_NEWADDR, req, func(b []byte) error {
		link, addr, err := nl.DecodeIfAddr(b)
		if _, ok := want[link]; ok && err == nil && addr.IsValid() {
			out = append(out, addr.Unmap())
		}
		return err
	})
	return out, err
}

// dump sends a dump request and hands each reply of type reply to
// decode, returning the kernel's error, else decode's first.
func (c *Conn) dump(ctx context.Context, typ, reply uint16, data []byte, decode func([]byte) error) error {
	var decodeErr error
	r := &nl.Request{Type: typ, Flags: netlink.Dump, Data: data}
	r.Handle = func(m netlink.Message) {
		if m.Header.Type != netlink.HeaderType(reply) {
			return
		}
		if err := decode(m.Data); err != nil && decodeErr == nil {
			decodeErr = err
		}
	}
	if err := c.nl.Exchange(ctx, r); err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	return decodeErr
}
