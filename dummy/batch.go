package dummy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Binding thousands of service addresses one request at a time costs a
// round trip each; BindAll and UnbindAll write many requests at once on a
// second rtnetlink socket and collect the acknowledgements.

// batchSize is how many requests go in one write: small enough for the
// socket buffers, large enough that a write costs little per address.
const batchSize = 256

// batchReadBuffer is the receive buffer asked for: the kernel queues a
// write's acknowledgements before this side reads any, and drops what does
// not fit with ENOBUFS. The default (208 KiB) held 256 of them on Linux 6.1
// but not on 6.12 (TestBatches). Binding needs CAP_NET_ADMIN, which lets
// the buffer exceed net.core.rmem_max.
const batchReadBuffer = 4 << 20

// BatchError lists the failures of BindAll or UnbindAll; the other
// addresses were bound or unbound. A failure that concerns a whole write
// has no address.
type BatchError struct {
	Failed []*Error
}

func (e *BatchError) Error() string {
	if len(e.Failed) == 1 {
		return e.Failed[0].Error()
	}
	return fmt.Sprintf("%v (and %d more failures)", e.Failed[0], len(e.Failed)-1)
}

// Unwrap returns every failure, so errors.Is matches if any failed so.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// BindAll binds every address as Bind does, in few system calls, and
// returns the failures in a *BatchError.
func (d *Device) BindAll(ctx context.Context, addrs []netip.Addr) error {
	return d.conn.addrBatch(ctx, "bind", d, addrs)
}

// UnbindAll unbinds every address as Unbind does, in few system calls.
func (d *Device) UnbindAll(ctx context.Context, addrs []netip.Addr) error {
	return d.conn.addrBatch(ctx, "unbind", d, addrs)
}

func (c *Conn) addrBatch(ctx context.Context, op string, d *Device, addrs []netip.Addr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw == nil {
		raw, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: c.netns})
		if err != nil {
			return fmt.Errorf("dummy: opening rtnetlink: %w", err)
		}
		// Capped acknowledgements do not echo the request.
		_ = raw.SetOption(netlink.CapAcknowledge, true)
		_ = raw.SetReadBuffer(batchReadBuffer)
		c.raw = raw
	}
	var failed []*Error
	for start := 0; start < len(addrs); start += batchSize {
		// Without a deadline of the caller's, each write gets its own
		// bound: the kernel's work per address grows with the number of
		// addresses on the device, so a large batch takes long in all.
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(replyTimeout)
		}
		if err := c.raw.SetDeadline(deadline); err != nil {
			return err
		}
		chunk := addrs[start:min(start+batchSize, len(addrs))]
		failed = append(failed, c.sendChunk(op, d, chunk)...)
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed}
	}
	return nil
}

// sendChunk writes one request per address and reads one acknowledgement
// per request; an error reply names its request by sequence number.
func (c *Conn) sendChunk(op string, d *Device, addrs []netip.Addr) []*Error {
	typ, flags := netlink.HeaderType(unix.RTM_NEWADDR), netlink.Request|netlink.Acknowledge|netlink.Create|netlink.Replace
	if op == "unbind" {
		typ, flags = unix.RTM_DELADDR, netlink.Request|netlink.Acknowledge
	}
	msgs := make([]netlink.Message, 0, len(addrs))
	var errs []*Error
	var valid []netip.Addr
	for _, a := range addrs {
		if !a.IsValid() {
			errs = append(errs, opError(op, d.name, a, errors.New("invalid address")))
			continue
		}
		if c.fault != nil {
			if err := c.fault(op); err != nil {
				errs = append(errs, opError(op, d.name, a, err))
				continue
			}
		}
		valid = append(valid, a)
		msgs = append(msgs, netlink.Message{Header: netlink.Header{Type: typ, Flags: flags}, Data: addrMessage(d.index, a.Unmap())})
	}
	if len(msgs) == 0 {
		return errs
	}
	sent, err := c.raw.SendMessages(msgs)
	if err != nil {
		return append(errs, opError(op, d.name, netip.Addr{}, err))
	}
	bySeq := make(map[uint32]netip.Addr, len(sent))
	for i, m := range sent {
		bySeq[m.Header.Sequence] = valid[i]
	}
	for pending := len(sent); pending > 0; {
		replies, err := c.raw.Receive()
		var oe *netlink.OpError
		switch {
		case errors.As(err, &oe) && oe.Sequence != 0:
			addr, ok := bySeq[oe.Sequence]
			if !ok {
				continue
			}
			pending--
			if ignorable(op, oe.Err) {
				continue
			}
			errs = append(errs, opError(op, d.name, addr, classify(oe.Err)))
		case err != nil:
			return append(errs, opError(op, d.name, netip.Addr{}, err))
		default:
			pending -= len(replies)
		}
	}
	return errs
}

// ignorable reports the errors that mean the work is already done.
func ignorable(op string, err error) bool {
	return op == "unbind" && (errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT))
}

// addrMessage encodes struct ifaddrmsg for a single-host address on link
// index, with its address attributes: IFA_LOCAL and IFA_ADDRESS for IPv4;
// IFA_ADDRESS and IFA_F_NODAD for IPv6.
func addrMessage(index int, a netip.Addr) []byte {
	family, bits := byte(unix.AF_INET), byte(32)
	if a.Is6() {
		family, bits = unix.AF_INET6, 128
	}
	hdr := make([]byte, 8)
	hdr[0], hdr[1] = family, bits
	binary.NativeEndian.PutUint32(hdr[4:], uint32(index))
	ae := netlink.NewAttributeEncoder()
	if a.Is4() {
		ae.Bytes(unix.IFA_LOCAL, a.AsSlice())
	}
	ae.Bytes(unix.IFA_ADDRESS, a.AsSlice())
	if a.Is6() {
		ae.Uint32(unix.IFA_FLAGS, unix.IFA_F_NODAD)
	}
	attrs, _ := ae.Encode()
	return append(hdr, attrs...)
}
