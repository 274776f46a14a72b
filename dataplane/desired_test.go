package dataplane

import (
	"strings"
	"testing"
)

// Load balancer source ranges are read per family, as kube-proxy reads
// them: a family with no range, or with a range of prefix length 0, is
// open to every source; only a family with ranges gets the firewall.
func TestLoadBalancerSourceRangesPerFamily(t *testing.T) {
	lb := svc("default", "lb", "", TCP, 443, "10.96.0.30", "fd00:96::30")
	lb.LoadBalancerIPs = ips("203.0.113.10", "2001:db8::10")
	lb.Endpoints = []Endpoint{ready("10.244.1.9", 8443, "node-a"), ready("fd00:244::9", 8443, "node-a")}
	tests := []struct {
		name         string
		ranges       []string
		fw4, fw6     bool
		sourceEntry4 string
	}{
		{name: "IPv4 ranges only", ranges: []string{"198.51.100.0/24"}, fw4: true, sourceEntry4: "203.0.113.10,tcp:443,198.51.100.0/24"},
		{name: "zero-prefix IPv4", ranges: []string{"0.0.0.0/0"}},
		{name: "zero-prefix among others", ranges: []string{"198.51.100.0/24", "0.0.0.0/0", "2001:db8:1::/48"}, fw6: true},
		{name: "zero-prefix IPv6", ranges: []string{"::/0", "198.51.100.0/24"}, fw4: true, sourceEntry4: "203.0.113.10,tcp:443,198.51.100.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := lb
			s.LoadBalancerSourceRanges = prefixes(tt.ranges...)
			d := Build(&State{Node: testNode(), Services: []ServicePort{s}})
			if len(d.Errors) > 0 {
				t.Fatal(d.Errors)
			}
			k := d.Kernel
			fw4 := k.Entries[SetName(SetLoadBalancerFW, false)]["203.0.113.10,tcp:443"]
			fw6 := k.Entries[SetName(SetLoadBalancerFW, true)]["2001:db8::10,tcp:443"]
			if fw4 != tt.fw4 || fw6 != tt.fw6 {
				t.Errorf("firewalled: IPv4 %v IPv6 %v, want %v %v", fw4, fw6, tt.fw4, tt.fw6)
			}
			for _, ipv6 := range []bool{false, true} {
				for e := range k.Entries[SetName(SetLoadBalancerSourceNet, ipv6)] {
					if strings.HasSuffix(e, "/0") {
						t.Errorf("a zero-prefix source entry: %q", e)
					}
				}
			}
			if tt.sourceEntry4 != "" && !k.Entries[SetName(SetLoadBalancerSourceNet, false)][tt.sourceEntry4] {
				t.Errorf("no source entry %q: %v", tt.sourceEntry4, k.Entries[SetName(SetLoadBalancerSourceNet, false)])
			}
		})
	}
}
