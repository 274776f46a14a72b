//go:build hosttest

package linkaddr

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// The addresses of every link but the service device, read link by link
// and, as on a kernel without strict checking, in one dump, checked
// against addresses set with ip.
func TestAddressesKernel(t *testing.T) {
	ns := testutil.NewNetNS(t)
	ns.Run(t, "ip", "link", "set", "lo", "up")
	ns.Run(t, "ip", "link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "eth9")
	for _, args := range [][]string{
		{"addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0"},
		{"addr", "add", "10.96.0.11/32", "dev", "kube-ipvs0"},
		{"addr", "add", "192.0.2.5/24", "dev", "eth9"},
		{"addr", "add", "2001:db8::5/64", "dev", "eth9", "nodad"},
		{"addr", "add", "198.51.100.7/32", "dev", "lo"},
		{"link", "set", "eth9", "up"},
	} {
		ns.Run(t, "ip", args...)
	}
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.5"),
		netip.MustParseAddr("198.51.100.7"), netip.IPv6Loopback(), netip.MustParseAddr("2001:db8::5")}
	for _, strict := range []bool{true, false} {
		var got []netip.Addr
		kernelStrict := false
		err := ns.Do(func() error {
			c, err := Dial(nil)
			if err != nil {
				return err
			}
			defer c.Close()
			if kernelStrict = c.strict; !kernelStrict {
				return nil
			}
			c.strict = strict
			got, err = c.Addresses(t.Context(), "kube-ipvs0")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		testutil.Require(t, kernelStrict, "a kernel that checks netlink dumps strictly (Linux 4.20 or later)")
		// An IPv6 link-local address comes and goes with the link's
		// carrier; the others are those set.
		got = slices.DeleteFunc(got, netip.Addr.IsLinkLocalUnicast)
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, want) {
			t.Errorf("strict %v: Addresses = %v, want %v", strict, got, want)
		}
	}
}
