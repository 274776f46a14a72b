package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// putAddr writes an address as the kernel's union nf_inet_addr: 16 bytes,
// an IPv4 address in the first four, as ipvsadm sends it.
func putAddr(ae *netlink.AttributeEncoder, typ uint16, a netip.Addr) {
	var b [inetAddrLen]byte
	if a.Is4() {
		v4 := a.As4()
		copy(b[:], v4[:])
	} else {
		b = a.As16()
	}
	ae.Bytes(typ, b[:])
}

// putPort writes a port in network byte order, as the kernel keeps it.
func putPort(ae *netlink.AttributeEncoder, typ uint16, p uint16) {
	ae.Bytes(typ, binary.BigEndian.AppendUint16(nil, p))
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

// attrDecoder wraps an AttributeDecoder to check sizes itself, so a
// malformed attribute yields an error naming it rather than a panic or a
// silent zero.
type attrDecoder struct {
	*netlink.AttributeDecoder
	what string
	err  error
}

func newAttrDecoder(b []byte, what string) (*attrDecoder, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &attrDecoder{AttributeDecoder: ad, what: what}, nil
}

func (d *attrDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s attribute %d: %s", d.what, d.Type(), fmt.Sprintf(format, args...))
	}
}

func (d *attrDecoder) u8() uint8 {
	b := d.Bytes()
	if len(b) != 1 {
		d.fail("%d bytes, want 1", len(b))
		return 0
	}
	return b[0]
}

func (d *attrDecoder) u16() uint16 {
	b := d.Bytes()
	if len(b) != 2 {
		d.fail("%d bytes, want 2", len(b))
		return 0
	}
	return binary.NativeEndian.Uint16(b)
}

func (d *attrDecoder) u32() uint32 {
	b := d.Bytes()
	if len(b) != 4 {
		d.fail("%d bytes, want 4", len(b))
		return 0
	}
	return binary.NativeEndian.Uint32(b)
}

// counter reads a statistics counter, which is 4 or 8 bytes depending on
// the attribute set and the counter.
func (d *attrDecoder) counter() uint64 {
	b := d.Bytes()
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
	b := d.Bytes()
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

func (d *attrDecoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if err := d.Err(); err != nil {
		return fmt.Errorf("%s: %w", d.what, err)
	}
	return nil
}
