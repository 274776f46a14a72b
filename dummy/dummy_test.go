package dummy

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

func TestHostAddr(t *testing.T) {
	tests := []struct {
		addr   string
		prefix string
		nodad  bool
	}{
		{"10.96.0.1", "10.96.0.1/32", false},
		{"::ffff:10.96.0.1", "10.96.0.1/32", false},
		{"fd00::1", "fd00::1/128", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := hostAddr(netip.MustParseAddr(tt.addr))
			if err != nil {
				t.Fatal(err)
			}
			if got.IPNet.String() != tt.prefix {
				t.Errorf("prefix %s, want %s", got.IPNet, tt.prefix)
			}
			if nodad := got.Flags&unix.IFA_F_NODAD != 0; nodad != tt.nodad {
				t.Errorf("IFA_F_NODAD %v, want %v", nodad, tt.nodad)
			}
		})
	}
	if _, err := hostAddr(netip.Addr{}); err == nil {
		t.Error("the zero address was accepted")
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
			text:  "dummy: get kube-ipvs0: link not found: no such device",
			match: []error{ErrLinkNotFound, unix.ENODEV},
		},
		{
			name:  "wrong kind says which",
			err:   opError("ensure", "kube-ipvs0", netip.Addr{}, kindError{kind: ErrWrongKind, err: errors.New(`it is of kind "veth"`)}),
			text:  `dummy: ensure kube-ipvs0: link is not a dummy device: it is of kind "veth"`,
			match: []error{ErrWrongKind},
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
			text:  "dummy: ensure kube-ipvs0: dummy devices are not supported by this kernel (CONFIG_DUMMY): operation not supported",
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
