package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/nl"
)

// writeAddr writes an address as the kernel's union nf_inet_addr: 16
// bytes, an IPv4 address in the first four, as ipvsadm sends it.
func writeAddr(w *nl.Writer, typ uint16, a netip.Addr) {
	var b [inetAddrLen]byte
	if a.Is4() {
		v4 := a.As4()
		copy(b[:], v4[:])
	} else {
		b = a.As16()
	}
	w.Bytes(typ, b[:])
}

// decodeAddr reads a union nf_inet_addr of the given family. The kernel
// accepts (and older kernels sent) just the address bytes, so 4 bytes are
// fine for IPv4.
func decodeAddr(b []byte, f inet.Family) (netip.Addr, error) {
	switch {
	case f == inet.IPv4 && len(b) >= 4:
		return netip.AddrFrom4([4]byte(b[:4])), nil
	case f == inet.IPv6 && len(b) >= 16:
		return netip.AddrFrom16([16]byte(b[:16])), nil
	}
	return netip.Addr{}, fmt.Errorf("address of %d bytes for %v", len(b), f)
}

// decodeByte reads a 16-bit attribute that carries an 8-bit value: an
// address family or an IP protocol number.
func decodeByte(d *nl.Reader, what string) uint8 {
	v := d.Uint16()
	if v > 0xff {
		d.Fail("%s %d out of range", what, v)
	}
	return uint8(v)
}

func decodePort(b []byte) (uint16, error) {
	if len(b) != 2 {
		return 0, fmt.Errorf("port of %d bytes", len(b))
	}
	return binary.BigEndian.Uint16(b), nil
}

// counter reads a statistics counter, which is 4 or 8 bytes depending on
// the attribute set and the counter.
func counter(d *nl.Reader) uint64 {
	b := d.Bytes()
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b))
	case 8:
		return binary.NativeEndian.Uint64(b)
	}
	d.Fail("%d bytes, want 4 or 8", len(b))
	return 0
}
