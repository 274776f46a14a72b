package sloppy

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for refused
	}{
		{"010.000.0.1", "10.0.0.1"},
		{"10.0.0.1", "10.0.0.1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"fd00::1", "fd00::1"},
		{"fe80::1%eth0", ""},
		{"10.0.0", ""},
	} {
		got, ok := ParseAddr(tc.in)
		if (tc.want == "") == ok || (ok && got != netip.MustParseAddr(tc.want)) {
			t.Errorf("ParseAddr(%q) = %v, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"010.0.0.0/8", "10.0.0.0/8"},
		{"10.1.2.3/16", "10.1.0.0/16"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"fd00::1/64", "fd00::/64"},
		{"10.0.0.0", ""},
		{"10.0.0.0/33", ""},
	} {
		got, ok := ParsePrefix(tc.in)
		if (tc.want == "") == ok || (ok && got != netip.MustParsePrefix(tc.want)) {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func Example() {
	a, _ := ParseAddr("010.096.000.001")
	p, _ := ParsePrefix("010.244.1.0/16")
	fmt.Println(a, p)
	// Output: 10.96.0.1 10.244.0.0/16
}
