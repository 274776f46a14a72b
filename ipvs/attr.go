package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// attrWriter appends netlink attributes (struct nlattr, 4-byte aligned)
// to a byte slice. Requests are written with it rather than with
// netlink.AttributeEncoder, which allocates for every attribute and
// nest: for a batch of thousands of operations that was most of the time
// spent outside the kernel.
type attrWriter struct {
	b []byte
}

const nlaFNested = 0x8000 // NLA_F_NESTED, as libipvs sets it

func (w *attrWriter) header(typ uint16, n int) {
	w.b = binary.NativeEndian.AppendUint16(w.b, uint16(4+n))
	w.b = binary.NativeEndian.AppendUint16(w.b, typ)
}

func (w *attrWriter) pad() {
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}

func (w *attrWriter) bytes(typ uint16, v []byte) {
	w.header(typ, len(v))
	w.b = append(w.b, v...)
	w.pad()
}

func (w *attrWriter) u8(typ uint16, v uint8) {
	w.header(typ, 1)
	w.b = append(w.b, v)
	w.pad()
}

func (w *attrWriter) u16(typ uint16, v uint16) {
	w.header(typ, 2)
	w.b = binary.NativeEndian.AppendUint16(w.b, v)
	w.pad()
}

func (w *attrWriter) u32(typ uint16, v uint32) {
	w.header(typ, 4)
	w.b = binary.NativeEndian.AppendUint32(w.b, v)
}

// be16 writes a value in network byte order: ports, as the kernel keeps
// them.
func (w *attrWriter) be16(typ uint16, v uint16) {
	w.header(typ, 2)
	w.b = binary.BigEndian.AppendUint16(w.b, v)
	w.pad()
}

// str writes a NUL-terminated string.
func (w *attrWriter) str(typ uint16, v string) {
	w.header(typ, len(v)+1)
	w.b = append(w.b, v...)
	w.b = append(w.b, 0)
	w.pad()
}

// addr writes an address as the kernel's union nf_inet_addr: 16 bytes,
// an IPv4 address in the first four, as ipvsadm sends it.
func (w *attrWriter) addr(typ uint16, a netip.Addr) {
	var b [inetAddrLen]byte
	if a.Is4() {
		v4 := a.As4()
		copy(b[:], v4[:])
	} else {
		b = a.As16()
	}
	w.bytes(typ, b[:])
}

// begin starts a nest; end closes the nest begin returned.
func (w *attrWriter) begin(typ uint16) int {
	start := len(w.b)
	w.header(typ|nlaFNested, 0)
	return start
}

func (w *attrWriter) end(start int) {
	binary.NativeEndian.PutUint16(w.b[start:], uint16(len(w.b)-start))
}

// decodeAddr reads a union nf_inet_addr of the given family. The kernel
// accepts (and older kernels sent) just the address bytes, so 4 bytes are
// fine for IPv4.
func decodeAddr(b []byte, f Family) (netip.Addr, error) {
	switch {
	case f == IPv4 && len(b) >= 4:
		return netip.AddrFrom4([4]byte(b[:4])), nil
	case f == IPv6 && len(b) >= 16:
		return netip.AddrFrom16([16]byte(b[:16])), nil
	}
	return netip.Addr{}, fmt.Errorf("address of %d bytes for %v", len(b), f)
}

func decodePort(b []byte) (uint16, error) {
	if len(b) != 2 {
		return 0, fmt.Errorf("port of %d bytes", len(b))
	}
	return binary.BigEndian.Uint16(b), nil
}

// attrDecoder walks netlink attributes in place. It replaces
// netlink.AttributeDecoder, which copies every attribute it steps over:
// listing thousands of services spent most of its time allocating there.
// It checks sizes itself, so a malformed attribute yields an error naming
// it rather than a panic or a silent zero.
type attrDecoder struct {
	b    []byte // what is left after the current attribute
	typ  uint16
	data []byte // the current attribute's payload, aliasing the input
	what string
	err  error
}

func newAttrDecoder(b []byte, what string) attrDecoder {
	return attrDecoder{b: b, what: what}
}

// Next moves to the next attribute; it returns false at the end or on a
// malformed header.
func (d *attrDecoder) Next() bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	if len(d.b) < 4 {
		d.err = fmt.Errorf("%s: %d trailing bytes", d.what, len(d.b))
		return false
	}
	l := int(binary.NativeEndian.Uint16(d.b[0:2]))
	if l < 4 || l > len(d.b) {
		d.err = fmt.Errorf("%s: attribute of length %d in %d bytes", d.what, l, len(d.b))
		return false
	}
	// The top bits are NLA_F_NESTED and NLA_F_NET_BYTEORDER.
	d.typ = binary.NativeEndian.Uint16(d.b[2:4]) & 0x3fff
	d.data = d.b[4:l]
	d.b = d.b[min((l+3)&^3, len(d.b)):]
	return true
}

// Type returns the current attribute's type.
func (d *attrDecoder) Type() uint16 { return d.typ }

func (d *attrDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s attribute %d: %s", d.what, d.typ, fmt.Sprintf(format, args...))
	}
}

// raw returns the current attribute's payload without copying it; it
// aliases the input, which the caller keeps.
func (d *attrDecoder) raw() []byte { return d.data }

func (d *attrDecoder) u8() uint8 {
	b := d.raw()
	if len(b) != 1 {
		d.fail("%d bytes, want 1", len(b))
		return 0
	}
	return b[0]
}

func (d *attrDecoder) u16() uint16 {
	b := d.raw()
	if len(b) != 2 {
		d.fail("%d bytes, want 2", len(b))
		return 0
	}
	return binary.NativeEndian.Uint16(b)
}

func (d *attrDecoder) u32() uint32 {
	b := d.raw()
	if len(b) != 4 {
		d.fail("%d bytes, want 4", len(b))
		return 0
	}
	return binary.NativeEndian.Uint32(b)
}

// counter reads a statistics counter, which is 4 or 8 bytes depending on
// the attribute set and the counter.
func (d *attrDecoder) counter() uint64 {
	b := d.raw()
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b))
	case 8:
		return binary.NativeEndian.Uint64(b)
	}
	d.fail("%d bytes, want 4 or 8", len(b))
	return 0
}

// str reads a NUL-terminated string that fits max bytes with its NUL.
func (d *attrDecoder) str(max int) string {
	b := d.raw()
	for i, c := range b {
		if c == 0 && i < max {
			return string(b[:i])
		}
	}
	if len(b) >= max {
		d.fail("string of %d bytes, longer than %d", len(b), max-1)
		return ""
	}
	return string(b)
}

func (d *attrDecoder) finish() error { return d.err }
