package nl

import (
	"net/netip"
	"slices"
	"testing"
)

// What the Writer writes, the Reader reads back, nests included.
func TestAttributesRoundTrip(t *testing.T) {
	var w Writer
	w.Uint8(1, 7)
	n := w.Begin(2 | Nested)
	w.BE16(3|NetByteOrder, 0x1234)
	w.String(4, "dummy")
	w.Addr(5, netip.MustParseAddr("fd00::1"))
	w.End(n)
	w.BE64(6, 1<<40)
	w.Uint32(7, 9)
	if len(w.B)%4 != 0 {
		t.Fatalf("%d bytes, not aligned", len(w.B))
	}
	d := NewReader(w.B, "test")
	var got []any
	for d.Next() {
		switch d.Type() {
		case 1:
			got = append(got, d.Uint8())
		case 2:
			d.Nest(func(nd *Reader) {
				for nd.Next() {
					switch nd.Type() {
					case 3:
						got = append(got, nd.BE16())
					case 4:
						got = append(got, nd.String(16))
					case 5:
						got = append(got, nd.Addr())
					}
				}
			})
		case 6:
			got = append(got, d.BE64())
		case 7:
			got = append(got, d.Uint32())
		}
	}
	want := []any{uint8(7), uint16(0x1234), "dummy", netip.MustParseAddr("fd00::1"), uint64(1 << 40), uint32(9)}
	if d.Err() != nil || len(got) != len(want) {
		t.Fatalf("read %v, %v; want %v", got, d.Err(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("attribute %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// Malformed input is an error naming the attribute, never a panic.
func TestReaderErrors(t *testing.T) {
	for _, b := range [][]byte{
		{1, 0},                       // trailing bytes
		{9, 0, 1, 0, 0, 0, 0, 0},     // length past the end
		{5, 0, 1, 0, 1, 0, 0, 0},     // a uint32 of one byte
		{6, 0, 1, 0, 'a', 'b', 0, 0}, // a string too long
	} {
		d := NewReader(b, "test")
		for d.Next() {
			_ = d.Uint32()
			_ = d.String(2)
		}
		if d.Err() == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

// An error inside nests names the path down to the attribute, however
// deep.
func TestReaderNestedErrorNames(t *testing.T) {
	var w Writer
	starts := make([]int, 6)
	for i := range starts {
		starts[i] = w.Begin(uint16(i + 1))
	}
	w.Bytes(9, []byte{1})
	for _, s := range slices.Backward(starts) {
		w.End(s)
	}
	var read func(d *Reader)
	read = func(d *Reader) {
		for d.Next() {
			if d.Type() == 9 {
				_ = d.Uint32()
			} else {
				d.Nest(read)
			}
		}
	}
	d := NewReader(w.B, "test")
	read(&d)
	want := "test attribute 1 attribute 2 attribute 3 attribute 4 attribute 5 attribute 6 attribute 9: 1 bytes, want 4"
	if err := d.Err(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
