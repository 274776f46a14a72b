package nl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Attribute type flags, from include/uapi/linux/netlink.h.
const (
	Nested       = 0x8000 // NLA_F_NESTED
	NetByteOrder = 0x4000 // NLA_F_NET_BYTEORDER
	typeMask     = 0x3fff
)

// Writer appends netlink attributes (struct nlattr, 4-byte aligned) to a
// byte slice. The kernel packages write requests with it rather than
// with netlink.AttributeEncoder, which allocates for every attribute and
// nest: for a batch of thousands of operations that was most of the time
// spent outside the kernel. Integers are in host byte order unless the
// method says big-endian (network order).
type Writer struct {
	B []byte
}

func (w *Writer) header(typ uint16, n int) {
	w.B = binary.NativeEndian.AppendUint16(w.B, uint16(4+n))
	w.B = binary.NativeEndian.AppendUint16(w.B, typ)
}

func (w *Writer) pad() {
	for len(w.B)%4 != 0 {
		w.B = append(w.B, 0)
	}
}

// Bytes writes an attribute holding b.
func (w *Writer) Bytes(typ uint16, b []byte) {
	w.header(typ, len(b))
	w.B = append(w.B, b...)
	w.pad()
}

// Flag writes an attribute with no payload.
func (w *Writer) Flag(typ uint16) { w.header(typ, 0) }

func (w *Writer) Uint8(typ uint16, v uint8) {
	w.header(typ, 1)
	w.B = append(w.B, v)
	w.pad()
}

func (w *Writer) Uint16(typ uint16, v uint16) {
	w.header(typ, 2)
	w.B = binary.NativeEndian.AppendUint16(w.B, v)
	w.pad()
}

func (w *Writer) Uint32(typ uint16, v uint32) {
	w.header(typ, 4)
	w.B = binary.NativeEndian.AppendUint32(w.B, v)
}

func (w *Writer) Uint64(typ uint16, v uint64) {
	w.header(typ, 8)
	w.B = binary.NativeEndian.AppendUint64(w.B, v)
}

// BE16 writes a 16-bit value in network byte order.
func (w *Writer) BE16(typ uint16, v uint16) {
	w.header(typ, 2)
	w.B = binary.BigEndian.AppendUint16(w.B, v)
	w.pad()
}

// BE32 writes a 32-bit value in network byte order.
func (w *Writer) BE32(typ uint16, v uint32) {
	w.header(typ, 4)
	w.B = binary.BigEndian.AppendUint32(w.B, v)
}

// BE64 writes a 64-bit value in network byte order.
func (w *Writer) BE64(typ uint16, v uint64) {
	w.header(typ, 8)
	w.B = binary.BigEndian.AppendUint64(w.B, v)
}

// String writes a NUL-terminated string.
func (w *Writer) String(typ uint16, v string) {
	w.header(typ, len(v)+1)
	w.B = append(w.B, v...)
	w.B = append(w.B, 0)
	w.pad()
}

// Addr writes an address's 4 or 16 bytes.
func (w *Writer) Addr(typ uint16, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		w.Bytes(typ, b[:])
		return
	}
	b := a.As16()
	w.Bytes(typ, b[:])
}

// Begin starts a nest of type typ (NLA_F_NESTED is not added: some
// families want it and some do not); End closes the nest Begin returned.
func (w *Writer) Begin(typ uint16) int {
	start := len(w.B)
	w.header(typ, 0)
	return start
}

// End closes a nest.
func (w *Writer) End(start int) {
	binary.NativeEndian.PutUint16(w.B[start:], uint16(len(w.B)-start))
}

// Reader walks netlink attributes in place. Unlike
// netlink.AttributeDecoder it copies nothing it steps over, and it checks
// sizes itself, so a malformed attribute yields an error naming it rather
// than a panic or a silent zero.
type Reader struct {
	b    []byte // what is left after the current attribute
	typ  uint16
	data []byte // the current attribute's payload, aliasing the input
	// what, followed by the types of the attributes nested down to this
	// reader's, names it in errors; the name is formatted only for one: a
	// dump decodes several nests per entry, and formatting each name cost
	// a large dump a tenth of its time.
	what  string
	path  [4]uint16
	depth int
	err   error
}

// name is what names the reader in errors.
func (d *Reader) name() string {
	var b strings.Builder
	b.WriteString(d.what)
	for _, typ := range d.path[:d.depth] {
		fmt.Fprintf(&b, " attribute %d", typ)
	}
	return b.String()
}

// NewReader reads the attributes in b; what names them in errors.
func NewReader(b []byte, what string) Reader {
	return Reader{b: b, what: what}
}

// Next moves to the next attribute; it returns false at the end or on a
// malformed header.
func (d *Reader) Next() bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	if len(d.b) < 4 {
		d.err = fmt.Errorf("%s: %d trailing bytes", d.name(), len(d.b))
		return false
	}
	l := int(binary.NativeEndian.Uint16(d.b[0:2]))
	if l < 4 || l > len(d.b) {
		d.err = fmt.Errorf("%s: attribute of length %d in %d bytes", d.name(), l, len(d.b))
		return false
	}
	d.typ = binary.NativeEndian.Uint16(d.b[2:4]) & typeMask
	d.data = d.b[4:l]
	d.b = d.b[min(Align(l), len(d.b)):]
	return true
}

// Type returns the current attribute's type, without its flags.
func (d *Reader) Type() uint16 { return d.typ }

// Err returns the first error met.
func (d *Reader) Err() error { return d.err }

// Fail records an error about the current attribute, unless one is
// recorded already.
func (d *Reader) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s attribute %d: %s", d.name(), d.typ, fmt.Sprintf(format, args...))
	}
}

// Bytes returns the current attribute's payload without copying it; it
// aliases the input.
func (d *Reader) Bytes() []byte { return d.data }

// Nested returns a reader of the current attribute's payload.
func (d *Reader) Nested() Reader {
	if d.depth == len(d.path) {
		return Reader{b: d.data, what: fmt.Sprintf("%s attribute %d", d.name(), d.typ)}
	}
	n := Reader{b: d.data, what: d.what, path: d.path, depth: d.depth + 1}
	n.path[d.depth] = d.typ
	return n
}

// Nest reads the current attribute's payload with fn and keeps the first
// error.
func (d *Reader) Nest(fn func(*Reader)) {
	n := d.Nested()
	fn(&n)
	if d.err == nil {
		d.err = n.err
	}
}

func (d *Reader) fixed(n int) []byte {
	if len(d.data) != n {
		d.Fail("%d bytes, want %d", len(d.data), n)
		return nil
	}
	return d.data
}

func (d *Reader) Uint8() uint8 {
	if b := d.fixed(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *Reader) Uint16() uint16 {
	if b := d.fixed(2); b != nil {
		return binary.NativeEndian.Uint16(b)
	}
	return 0
}

func (d *Reader) Uint32() uint32 {
	if b := d.fixed(4); b != nil {
		return binary.NativeEndian.Uint32(b)
	}
	return 0
}

func (d *Reader) Uint64() uint64 {
	if b := d.fixed(8); b != nil {
		return binary.NativeEndian.Uint64(b)
	}
	return 0
}

// BE16 reads a 16-bit value in network byte order.
func (d *Reader) BE16() uint16 {
	if b := d.fixed(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// BE32 reads a 32-bit value in network byte order.
func (d *Reader) BE32() uint32 {
	if b := d.fixed(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// BE64 reads a 64-bit value in network byte order.
func (d *Reader) BE64() uint64 {
	if b := d.fixed(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// String reads a string, NUL-terminated or not, of at most max bytes with
// its NUL (0: any length).
func (d *Reader) String(max int) string {
	b := d.data
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if max > 0 && len(b) >= max {
		d.Fail("string of %d bytes, longer than %d", len(b), max-1)
		return ""
	}
	return string(b)
}

// Addr reads a 4- or 16-byte address.
func (d *Reader) Addr() netip.Addr {
	switch len(d.data) {
	case 4:
		return netip.AddrFrom4([4]byte(d.data))
	case 16:
		return netip.AddrFrom16([16]byte(d.data))
	}
	d.Fail("address of %d bytes", len(d.data))
	return netip.Addr{}
}
