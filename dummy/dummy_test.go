package dummy

import (
	"errors"
	"net/netip"
	"testing"

	"encoding/binary"
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"github.com/ipvsplane/ipvsplane/internal/uapi"
	"golang.org/x/sys/unix"
	"slices"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// Addresses are bound as host prefixes, IPv6 without duplicate address
// detection, as iproute2 sends them: ifaddrmsg, then IFA_LOCAL (IPv4
// only), IFA_ADDRESS and IFA_FLAGS (IPv6 only).
func TestAddrMessage(t *testing.T) {
	tests := []struct {
		addr  string
		bits  byte
		attrs []uint16
	}{
		{"10.96.0.1", 32, []uint16{uapi.IFA_LOCAL, uapi.IFA_ADDRESS}},
		{"fd00::1", 128, []uint16{uapi.IFA_ADDRESS, uapi.IFA_FLAGS}},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			b := addrMessage(7, a)
			if b[1] != tt.bits || binary.NativeEndian.Uint32(b[4:8]) != 7 {
				t.Errorf("ifaddrmsg %x, want prefix %d on link 7", b[:8], tt.bits)
			}
			got, ok, err := decodeAddr(b, 7)
			if err != nil || !ok || got != a {
				t.Errorf("decodes as %v, %v, %v", got, ok, err)
			}
			var types []uint16
			d := nl.NewReader(b[nl.IfAddrMsgLen:], "address")
			for d.Next() {
				types = append(types, d.Type())
				if d.Type() == uapi.IFA_FLAGS && d.Uint32() != uapi.IFA_F_NODAD {
					t.Errorf("IFA_FLAGS %#x, want IFA_F_NODAD", d.Uint32())
				}
			}
			if !slices.Equal(types, tt.attrs) {
				t.Errorf("attributes %v, want %v", types, tt.attrs)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		text  string
		match []error
	}{
		{
			name:  "not found keeps ENODEV",
			err:   opError("get", "kube-ipvs0", netip.Addr{}, classify(unix.ENODEV)),
			text:  "dummy: get kube-ipvs0: link does not exist (no such device)",
			match: []error{ErrLinkNotExist, unix.ENODEV},
		},
		{
			name:  "wrong kind says which",
			err:   opError("ensure", "kube-ipvs0", netip.Addr{}, sentinelError{sentinel: ErrLinkNotDummy, err: errors.New(`it is of kind "veth"`)}),
			text:  `dummy: ensure kube-ipvs0: link is not a dummy device (it is of kind "veth")`,
			match: []error{ErrLinkNotDummy},
		},
		{
			name:  "bind names the address",
			err:   opError("bind", "kube-ipvs0", netip.MustParseAddr("10.0.0.1"), unix.EPERM),
			text:  "dummy: bind 10.0.0.1 on kube-ipvs0: operation not permitted",
			match: []error{unix.EPERM},
		},
		{
			name:  "no driver",
			err:   opError("ensure", "kube-ipvs0", netip.Addr{}, classify(unix.EOPNOTSUPP)),
			text:  "dummy: ensure kube-ipvs0: dummy devices are not supported by this kernel, built without CONFIG_DUMMY (operation not supported)",
			match: []error{ErrNotSupported, unix.EOPNOTSUPP},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.text {
				t.Errorf("text %q, want %q", got, tt.text)
			}
			for _, target := range tt.match {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v) is false", target)
				}
			}
		})
	}
}
