package dummy

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"

	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
)

// Binding thousands of service addresses one request at a time costs a
// round trip each; BindAll and UnbindAll write many requests at once and
// collect each one's outcome.

// BindAll binds every address as Bind does, in few system calls, and
// returns the failures in a *BatchError.
func (d *Device) BindAll(ctx context.Context, addrs []netip.Addr) error {
	return d.addrBatch(ctx, "bind", addrs, true)
}

// UnbindAll unbinds every address as Unbind does, in few system calls.
func (d *Device) UnbindAll(ctx context.Context, addrs []netip.Addr) error {
	return d.addrBatch(ctx, "unbind", addrs, true)
}

// addrBatch binds or unbinds addrs; asBatch selects a *BatchError over
// the single address's *OpError. A failure of the whole batch, such as a
// missing link, is every address's failure.
func (d *Device) addrBatch(ctx context.Context, op string, addrs []netip.Addr, asBatch bool) error {
	if len(addrs) == 0 {
		return nil
	}
	var failed []*OpError
	fail := func(i int, err error) {
		oe := opError(op, d.name, addrs[i], err)
		oe.Index = i
		failed = append(failed, oe)
	}
	index, err := d.conn.lookup(ctx, d.name)
	if err != nil {
		for i := range addrs {
			fail(i, err)
		}
		return batchError(failed, len(addrs), asBatch)
	}
	reqs := make([]nl.Request, 0, len(addrs))
	sent := make([]int, 0, len(addrs))
	for i, a := range addrs {
		if !a.IsValid() {
			fail(i, errors.New("invalid address"))
			continue
		}
		reqs = append(reqs, d.request(op, index, a.Unmap()))
		sent = append(sent, i)
	}
	ptrs := make([]*nl.Request, len(reqs))
	for i := range reqs {
		ptrs[i] = &reqs[i]
	}
	if err := d.conn.nl.Exchange(ctx, ptrs...); err != nil {
		for _, i := range sent {
			fail(i, err)
		}
		return batchError(failed, len(addrs), asBatch)
	}
	for j, r := range reqs {
		if r.Err != nil && !ignorable(r.Type, r.Err) {
			fail(sent[j], classify(r.Err))
		}
	}
	return batchError(failed, len(addrs), asBatch)
}

// batchError returns the failures in the addresses' order, as a
// *BatchError or as the one address's *OpError.
func batchError(failed []*OpError, total int, asBatch bool) error {
	switch {
	case len(failed) == 0:
		return nil
	case !asBatch:
		return failed[0]
	}
	slices.SortFunc(failed, func(a, b *OpError) int { return a.Index - b.Index })
	return &BatchError{Failed: failed, Total: total}
}

// addrMessage encodes struct ifaddrmsg for a single-host address on link
// index, with its address attributes: IFA_LOCAL and IFA_ADDRESS for IPv4;
// IFA_ADDRESS and IFA_F_NODAD for IPv6.
func addrMessage(index int32, a netip.Addr) []byte {
	family, bits := byte(uapi.AF_INET), byte(32)
	if a.Is6() {
		family, bits = uapi.AF_INET6, 128
	}
	w := nl.Writer{B: make([]byte, nl.IfAddrMsgLen, 64)}
	w.B[0], w.B[1] = family, bits
	binary.NativeEndian.PutUint32(w.B[4:], uint32(index))
	if a.Is4() {
		w.Addr(uapi.IFA_LOCAL, a)
	}
	w.Addr(uapi.IFA_ADDRESS, a)
	if a.Is6() {
		w.Uint32(uapi.IFA_FLAGS, uapi.IFA_F_NODAD)
	}
	return w.B
}
